"""torch's backend: the CUDA caching allocator.

Its counters come from one ``torch._C._cuda_memoryStats(i)`` call per
device per reading: that call returns every counter at once (~22 µs on an
H200), whereas ``torch.cuda.memory_allocated()`` and its siblings each
rebuild and flatten the same dict (~118 µs apiece). Once _direct has found
and checked them, they are copied where the allocator keeps them instead.

Its extras: cleanup()'s steps (synchronize, cuBLAS workspaces, empty_cache,
the peak reset, ipc_collect), torch's out-of-memory observer, allocation
history and dumps (torch.cuda.memory, TorchHistory), the live
blocks and workspace sizes the holders walk attributes, the walk
itself (_holders, which walks torch's tensors), and the allocator's layout
(torch's memory snapshot without traces, summed by _torchlayout).

The functions before TorchBackend are torch's ways with its numbers and
calls: the tests' fake GPU, which stands in for torch's allocator, uses
them too.

Nothing here imports torch on its own: the agent thread only looks at
``sys.modules``, so a process that never imported torch pays nothing and a
half-finished import in another thread is never touched.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any, Callable, Mapping, Sequence

from . import _direct, _history, _torchlayout
from ._backend import Backend, Counters, History, Reader, Step, Unsupported, normalize_uuid

# torch's OOM observer is registered: torch keeps it for the life of the
# process and cannot remove one
_observing = False


def _torch(import_torch: bool) -> Any:
    m = sys.modules.get("torch")
    if m is None and import_torch:
        try:
            import torch as m  # noqa: PLC0415 - optional dependency
        except Exception:
            return None
    return m


# ---- torch's ways with its numbers and calls: TorchBackend's, and the
# tests' fake GPU's, which stands in for torch's allocator ----

def _stat(stats: Mapping[str, Any], name: str, field: str) -> int:
    # Nested as _cuda_memoryStats returns it, or flat as memory_stats() does.
    v = stats.get(name)
    if isinstance(v, Mapping):
        v = v.get("all")
        if isinstance(v, Mapping):
            return int(v.get(field, 0))
        return 0
    return int(stats.get(f"{name}.all.{field}", 0))


def counters(stats: Mapping[str, Any] | bytes) -> Counters:
    """Pick the counters gputop streams out of a torch memory-stats dict, or
    out of the allocator's own counters copied by a direct reading."""
    if type(stats) is bytes:
        return Counters(*_direct.counters(stats))
    try:
        # the agent thread's hot path: the nested dict _cuda_memoryStats returns
        a = stats["allocated_bytes"]["all"]
        r = stats["reserved_bytes"]["all"]
        return Counters(int(a["current"]), int(r["current"]), int(a["peak"]), int(r["peak"]),
                        int(stats["inactive_split_bytes"]["all"]["current"]),
                        int(stats.get("num_alloc_retries", 0)), int(stats.get("num_ooms", 0)))
    except (KeyError, TypeError, ValueError):
        pass
    return Counters(
        _stat(stats, "allocated_bytes", "current"),
        _stat(stats, "reserved_bytes", "current"),
        _stat(stats, "allocated_bytes", "peak"),
        _stat(stats, "reserved_bytes", "peak"),
        _stat(stats, "inactive_split_bytes", "current"),
        int(stats.get("num_alloc_retries", 0)),
        int(stats.get("num_ooms", 0)),
    )


def tick_readers(direct: _direct.Direct | None, read_raw: Callable[[int], Any],
                 devs: Sequence[int]) -> tuple[tuple[int, Reader], ...]:
    """The tick's readers: a copy of the allocator's counters where the
    direct reading is trusted, else the stats call. The tick only stores
    what they return; the counters are picked out at send time with the
    code warm."""
    views = direct.views if direct is not None else {}
    return tuple((d, views[d].tobytes) if d in views else (d, functools.partial(read_raw, d))
                 for d in devs)


def read(direct: _direct.Direct | None, read_raw: Callable[[int], Any], index: int) -> Counters:
    """One reading: in place where the direct reading is trusted and the
    counters held still, else a stats call."""
    c = direct.read(index) if direct is not None else None
    return Counters(*c) if c is not None else counters(read_raw(index))


def reading(direct: _direct.Direct | None) -> str:
    return direct.state if direct is not None else "stats call"


def cleanup_steps(calls: Any, devs: Sequence[int], reset_peak: bool) -> list[Step]:
    """torch's release steps, in order, made of calls' synchronize(i),
    clear_workspaces() (False where torch has none), empty_cache(),
    reset_peak(i) and ipc_collect()."""
    steps = [Step("synchronize", lambda: [calls.synchronize(d) for d in devs]),
             Step("cuBLAS workspaces", calls.clear_workspaces),
             Step("empty_cache", calls.empty_cache)]
    if reset_peak:
        steps.append(Step("reset_peak_memory_stats", lambda: [calls.reset_peak(d) for d in devs],
                          measured=False))
    steps.append(Step("ipc_collect", calls.ipc_collect))
    return steps


class TorchHistory(History):
    """torch.cuda.memory's allocation history and dump data (or what stands
    for that module: the tests' FakeMemory)."""

    def __init__(self, mem: Any, imports: Sequence[str] | None = None) -> None:
        self.mem = mem
        self.imports = tuple(SNAPSHOT_IMPORTS if imports is None else imports)  # what its snapshot imports

    def why_not(self) -> str:
        backend = ""
        try:
            get = getattr(self.mem, "get_allocator_backend", None)
            backend = str(get()) if get is not None else ""
        except Exception:
            pass
        if backend == "cudaMallocAsync":
            return ("the cudaMallocAsync allocator backend records no allocation history "
                    "(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync); history is off")
        if getattr(self.mem, "_record_memory_history", None) is None:
            return "this torch has no torch.cuda.memory._record_memory_history; history is off"
        return ""

    def record(self, max_entries: int) -> str:
        try:
            self.mem._record_memory_history(max_entries=max_entries, stacks="python")
        except Exception as e:
            return f"torch's _record_memory_history failed: {type(e).__name__}: {e}"
        return ""

    def stop(self) -> None:
        record = getattr(self.mem, "_record_memory_history", None)
        if record is not None:
            record(enabled=None)

    def labeller(self) -> Callable[[str], None] | None:
        set_meta = getattr(self.mem, "_set_memory_metadata", None)
        if set_meta is None:
            return None
        try:
            ok = getattr(self.mem, "_memory_metadata_supported", None)
            if ok is not None and not ok():
                return None  # the backend ignores it (and would warn)
        except Exception:
            return None
        return set_meta

    def dump_state(self) -> Any:
        return self.mem._snapshot()

    def prepare(self) -> bool:
        if not snapshot_imports(history_on(sys.modules.get("torch")), self.imports):
            return False
        import importlib  # noqa: PLC0415 - once per process

        try:
            importlib.import_module(self.imports[-1])  # as the snapshot's symbolising would
        except Exception:
            pass  # the snapshot tries again and says what failed
        return True


def held_at(dev: int) -> dict[str, Any]:
    """The holders walk's attribution of torch device dev (_holders, which
    this installation may lack: ImportError)."""
    from . import _holders  # noqa: PLC0415 - imported on first use

    return _holders.held_at(dev)


def row_walk(devs: Sequence[int], held: bool, ledger: bool) -> dict[int, dict[str, Any]]:
    """The holders walk of a row (_holders, which this installation may
    lack: ImportError): per device, held and the ledger."""
    from . import _holders  # noqa: PLC0415 - imported on first use

    return _holders.row_walk(devs, held, ledger)


def holders_report(dev: int | None) -> dict[str, Any] | None:
    """The holders walk's report of torch device dev, else the current one."""
    from . import _holders  # noqa: PLC0415 - written alongside; absent in minimal installs

    fn = getattr(_holders, "holders_report", None)
    if fn is None:
        return None
    return fn() if dev is None else fn(_holders.on_device(dev))


_KIB = 1024


def workspace_sizes(torch: Any, index: int) -> set[int]:
    """The sizes torch gives cuBLAS and cuBLASLt workspaces on a device:
    from torch's own getters where it has them, else worked out as
    CublasHandlePool.cpp does: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT"
    pairs; torch multiplies by COUNT since 2.x, summed sizes alone before),
    else 32 MiB from Hopper on and :4096:2:16:8 before (older torch gave
    32 MiB to sm90 alone, so both are taken from Hopper on); and
    CUBLASLT_WORKSPACE_SIZE (KiB) for cuBLASLt, else 1 MiB."""
    sizes: set[int] = set()
    for name in ("_cuda_getCublasWorkspaceSize", "_cuda_getCublasLtWorkspaceSize"):
        f = getattr(torch._C, name, None)
        if f is not None:
            try:
                sizes.add(int(f()))
            except Exception:
                pass
    if len(sizes) == 2:
        return sizes
    small = 4096 * _KIB * 2 + 16 * _KIB * 8
    cfg = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    pairs = re.findall(r":([0-9]+):([0-9]+)", cfg or "")
    if pairs:
        sizes.add(sum(int(a) * _KIB * int(b) for a, b in pairs))
        sizes.add(sum(int(a) * _KIB for a, _ in pairs))
    else:
        try:
            major = int(torch.cuda.get_device_properties(index).major)
        except Exception:
            major = 0
        sizes.add(small)
        if major >= 9:
            sizes.add(32 * _KIB * _KIB)
    lt = os.environ.get("CUBLASLT_WORKSPACE_SIZE", "").strip()
    sizes.add(int(lt) * _KIB if lt.isdigit() else _KIB * _KIB)
    return sizes


# What torch's memory snapshot imports when blocks carry Python stacks
# (allocation history on): torch 2.11's symbolising of the stacks imports
# torch._inductor, which imports torch._dynamo; the two import each other,
# so that import from gputop's thread, while the program's thread imports
# torch._dynamo (an optimizer's first use does), broke the program with
# "ImportError: cannot import name ... from partially initialized module".
SNAPSHOT_IMPORTS = ("torch._dynamo", "torch._inductor")


def imported(name: str) -> bool:
    """The module is in sys.modules and done initialising."""
    m = sys.modules.get(name)
    return m is not None and not getattr(getattr(m, "__spec__", None), "_initializing", False)


def history_on(torch: Any) -> bool:
    """Allocation history is on: gputop's, or the program's own."""
    if _history.on:
        return True
    enabled = getattr(getattr(torch, "_C", None), "_cuda_isHistoryEnabled", None)
    try:
        return bool(enabled()) if enabled is not None else False
    except Exception:
        return False


def snapshot_imports(history_on: bool, modules: Sequence[str] = SNAPSHOT_IMPORTS) -> str:
    """Backend.snapshot_imports for a torch whose history is on or off,
    whose snapshot imports modules."""
    if not history_on or all(imported(m) for m in modules):
        return ""
    return ("with allocation history on, torch's memory snapshot imports torch._inductor, "
            "which this program has not imported yet; gputop takes none of its own accord until it has")


def layout_reader(torch: Any) -> _torchlayout.Reader:
    """The cheapest exact reading of the allocator's layout this torch
    offers: its memory snapshot without traces
    (``_cuda_memorySnapshot((0, 0, False))``, where memory_snapshot takes
    include_traces: its cost does not grow with the allocation history),
    else the snapshot with them. Settings from the snapshot's
    allocator_settings, else the string torch took
    (``_accelerator_getAllocatorSettings``), else the environment.
    Unsupported where there is no snapshot to read."""
    C = getattr(torch, "_C", None)
    mem = getattr(getattr(torch, "cuda", None), "memory", None)
    try:
        get_backend = getattr(mem, "get_allocator_backend", None)
        backend = str(get_backend()) if get_backend is not None else "native"
    except Exception:
        backend = "native"
    if backend == "cudaMallocAsync":
        raise Unsupported("the cudaMallocAsync allocator backend keeps no segments or blocks to read "
                          "(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync): no layout")
    raw = getattr(C, "_cuda_memorySnapshot", None)
    public = getattr(mem, "memory_snapshot", None)
    note = ""
    if raw is not None and public is not None and _takes(public, "include_traces"):
        call = functools.partial(raw, (0, 0, False))
    elif getattr(mem, "_snapshot", None) is not None:
        call = mem._snapshot
        note = "this torch's memory snapshot always carries the allocation history: with history on a reading costs more"
    elif public is not None:
        call = public
    else:
        raise Unsupported("this torch has no memory snapshot (torch.cuda.memory_snapshot): "
                          "the allocator's layout cannot be read")
    getter = getattr(C, "_accelerator_getAllocatorSettings", None)
    mempools = getattr(C, "_MemPool", None) is not None or getattr(mem, "MemPool", None) is not None
    return _torchlayout.Reader(call, settings_text=getter, mempools=mempools,
                               order=_torchlayout.ENV_ORDER if getter is not None else _torchlayout.OLD_ENV_ORDER,
                               note=note)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    import inspect  # noqa: PLC0415 - once per process

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ---- the backend ----

class TorchBackend(Backend):
    """torch's CUDA caching allocator."""

    def __init__(self) -> None:
        self._info: dict[int, dict[str, Any]] = {}
        # torch._C._cuda_memoryStats once CUDA is initialised: the agent
        # thread reads 100 times a second and every microsecond it holds
        # the GIL is taken from the training thread. Forgotten in a forked
        # child, where CUDA cannot be used (forget()).
        self._memstats: Callable[[int], Mapping[str, Any]] | None = None
        # (device indices, _cuda_hasPrimaryContext) once CUDA is initialised:
        # torch's _snapshot() asks for the device list at every call, often after a
        # pause, when each Python call costs the most
        self._devprobe: tuple[range, Callable[[int], bool]] | None = None
        # the direct reading of the allocator's counters, once set up (_direct)
        self.direct: _direct.Direct | None = None
        self._layout: _torchlayout.Reader | None = None  # once CUDA is up (layout_reader)

    def forget(self) -> None:
        self.direct = None
        self._layout = None
        self._memstats = None
        self._devprobe = None
        self._info = {}

    def available(self, import_module: bool = True) -> bool:
        t = _torch(import_module)
        try:
            return bool(t is not None and t.cuda.is_available())
        except Exception:
            return False

    def _initialized(self) -> Any:
        t = _torch(False)
        if t is None:
            return None
        cuda = getattr(t, "cuda", None)
        # Never trigger CUDA's lazy init ourselves: a process that forks
        # later (DataLoader workers) must not find CUDA initialised by us.
        if cuda is None or not cuda.is_initialized():
            return None
        return t

    def devices(self) -> list[int]:
        probe = self._devprobe
        if probe is None:
            t = self._initialized()
            if t is None:
                return []
            has = getattr(t._C, "_cuda_hasPrimaryContext", None)
            if has is None:
                return [t.cuda.current_device()]
            # the device count is fixed once CUDA is up (CUDA_VISIBLE_DEVICES
            # is read at init), so a later call asks only which have a context
            probe = self._devprobe = (range(t.cuda.device_count()), has)
        span, has = probe
        return [i for i in span if has(i)]

    def info(self, index: int) -> dict[str, Any]:
        d = self._info.get(index)
        if d is None:
            t = self._initialized()
            if t is None:
                raise RuntimeError("CUDA is not initialised")
            p = t.cuda.get_device_properties(index)
            # gputop refuses a hello device without a uuid; an old torch
            # without one still gets its own (agent-only) device row.
            uuid = normalize_uuid(getattr(p, "uuid", None)) or f"unknown-cuda:{index}"
            d = {
                "index": index,
                "uuid": uuid,
                "name": str(p.name),
                "total": int(p.total_memory),
            }
            self._info[index] = d
        return d

    def read_raw(self, index: int) -> Mapping[str, Any]:
        """One stats call: the dict read() and the tick take the counters from."""
        f = self._memstats
        if f is None:
            t = self._initialized()
            if t is None:
                return {}
            f = self._memstats = t._C._cuda_memoryStats
        return f(index)

    counters = staticmethod(counters)

    def read(self, index: int) -> Counters:
        # dump_state()'s path, usually taken cold: in place where the direct
        # reading is trusted and the counters held still, else one stats
        # call, in as few Python frames as can be
        direct = self.direct
        c = direct.read(index) if direct is not None else None
        if c is not None:
            return Counters(*c)
        f = self._memstats
        return counters(f(index) if f is not None else self.read_raw(index))

    def tick_readers(self, devs: Sequence[int]) -> tuple[tuple[int, Reader], ...]:
        return tick_readers(self.direct, self.read_raw, devs)

    def maintain(self, devs: Sequence[int]) -> None:
        """Set up and check the direct reading."""
        d = self.direct
        if d is None:
            t = self._initialized()
            if t is None or not devs:
                return
            d = self.direct = _direct.Direct(_direct.torch_root(t), t.cuda.device_count, self.read_raw)
        d.maintain(devs)

    def reading(self) -> str:
        """"direct" (the counters copied in place), or "stats call" and why."""
        return reading(self.direct)

    def current(self) -> int | None:
        t = self._initialized()
        return None if t is None else int(t.cuda.current_device())

    def version(self) -> str:
        t = _torch(False)
        return str(getattr(t, "__version__", "")) if t is not None else ""

    def at_init(self, fn: Callable[[], None]) -> str:
        """At torch's lazy CUDA init (torch.cuda._lazy_call: torch runs it
        before the first allocation), or now when CUDA is up."""
        cuda = getattr(_torch(False), "cuda", None)
        # inside the lazy init (a call it runs asks for another): now, before
        # the first allocation all the same. Some torch versions (2.11) take their
        # init lock in _lazy_call, which _lazy_init holds while it runs the
        # queued calls: queueing from there would hang the program
        if cuda is not None and (cuda.is_initialized() or hasattr(getattr(cuda, "_tls", None), "is_initializing")):
            fn()
            return ""
        lazy = getattr(cuda, "_lazy_call", None)
        if lazy is None:
            return "this torch has no torch.cuda._lazy_call to attach at its first CUDA use"
        lazy(fn)
        return ""

    def init_reading(self) -> tuple[int, Counters]:
        # inside the lazy init torch.cuda.is_initialized() is still false,
        # so torch is asked directly
        t = _torch(True)
        dev = int(t._C._cuda_getDevice())
        return dev, counters(t._C._cuda_memoryStats(dev))

    def cleanup_steps(self, devs: Sequence[int], reset_peak: bool) -> list[Step]:
        return cleanup_steps(self, devs, reset_peak)

    def synchronize(self, index: int) -> None:
        t = self._initialized()
        if t is not None:
            t.cuda.synchronize(index)

    def clear_workspaces(self) -> bool:
        """Free torch's cuBLAS/cuBLASLt workspaces; False where torch cannot."""
        t = self._initialized()
        clear = getattr(t._C, "_cuda_clearCublasWorkspaces", None) if t is not None else None
        if clear is None:
            return False
        clear()
        return True

    def empty_cache(self) -> None:
        t = self._initialized()
        if t is not None:
            t.cuda.empty_cache()

    def reset_peak(self, index: int) -> None:
        t = self._initialized()
        if t is not None:
            t.cuda.reset_peak_memory_stats(index)

    def ipc_collect(self) -> None:
        t = self._initialized()
        if t is not None and hasattr(t.cuda, "ipc_collect"):
            t.cuda.ipc_collect()

    def watch_ooms(self, cb: Callable[[int, int, int, int], None], initialising: bool = False) -> bool:
        # The allocator keeps observers per device and only has devices after
        # CUDA's lazy init, so this waits until CUDA is initialised; inside
        # that init (torch._C._cuda_init has run) they are there already.
        global _observing
        if _observing:
            return True
        t = _torch(False) if initialising else self._initialized()
        attach = getattr(t._C, "_cuda_attach_out_of_memory_observer", None) if t is not None else None
        if attach is None:
            return False
        attach(cb)
        _observing = True
        return True

    def history(self, initialising: bool = False) -> History | None:
        # inside torch's lazy init torch.cuda.is_initialized() is still
        # false, but the allocators are there (torch._C._cuda_init has run)
        t = _torch(False) if initialising else self._initialized()
        return TorchHistory(t.cuda.memory) if t is not None else None

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        t = self._initialized()
        if t is None or self.snapshot_imports():
            return None  # no blocks: the walk counts storages' bytes
        # the layout's reading: torch's memory snapshot without the history
        # where this torch allows it (a row's ledger reads it: its cost must
        # not grow with the history)
        try:
            r = self._layout
            if r is None:
                r = self._layout = layout_reader(t)
            state = r.call()
        except Unsupported:
            return None
        segments = (state.get("segments") or ()) if isinstance(state, Mapping) else (state or ())
        out = []
        for seg in segments:
            if seg.get("device") != index:
                continue
            addr = int(seg["address"])
            for b in seg["blocks"]:
                size = int(b["size"])
                if b.get("state") == "active_allocated":
                    out.append((int(b.get("address", addr)), size, int(b.get("requested_size", size))))
                addr += size
        out.sort()
        return out

    def workspace_sizes(self, index: int) -> set[int]:
        t = self._initialized()
        if t is None:
            return set()
        return workspace_sizes(t, index)

    def held_at(self, dev: int) -> dict[str, Any] | None:
        return held_at(dev)

    def row_walk(self, devs: Sequence[int], held: bool, ledger: bool) -> dict[int, dict[str, Any]] | None:
        return row_walk(devs, held, ledger)

    def holders_report(self, dev: int | None) -> dict[str, Any] | None:
        return holders_report(dev)

    def limit(self, index: int) -> int | None:
        t = self._initialized()
        if t is None:  # CUDA not up yet
            return None
        # the C call behind get_per_process_memory_fraction: CUDA is up and
        # index is an ordinal already, and each row asks, often cold
        frac = getattr(getattr(t, "_C", None), "_cuda_getMemoryFraction", None) or getattr(
            t.cuda, "get_per_process_memory_fraction", None)
        if frac is None:  # a torch before the call
            return None
        # the allocator's own rule: allowed = total * fraction, as a size_t
        return int(float(frac(index)) * self.info(index)["total"])

    def layout_size(self, index: int) -> tuple[int, int] | None:
        return _torchlayout.size(self.read_raw(index))

    def layouts(self, devs: Sequence[int], state: Any = None) -> dict[int, dict[str, Any]] | None:
        r = self._layout
        if r is None:
            t = self._initialized()
            if t is None:
                return {}
            r = self._layout = layout_reader(t)
        return r.read(devs, state)

    def layout_note(self) -> str:
        return self._layout.note if self._layout is not None else ""

    def snapshot_imports(self) -> str:
        return snapshot_imports(history_on(self._initialized()))

    def memory_info(self, index: int) -> tuple[int, int]:
        # inside the lazy init torch.cuda.mem_get_info would wait for it:
        # the runtime is asked directly
        t = _torch(True)
        free, total = t.cuda.cudart().cudaMemGetInfo(index)
        return int(free), int(total)

    def cap_memory(self, index: int, cap: int, total: int) -> None:
        # torch allows total × fraction: the fraction rounded up, so the
        # cap is not a byte short
        t = _torch(True)
        t._C._cuda_setMemoryFraction(min(1.0, (cap + 0.5) / total), index)
