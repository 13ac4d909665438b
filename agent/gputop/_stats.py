"""Where the allocator numbers come from.

By default torch's caching allocator: one ``torch._C._cuda_memoryStats(i)``
call per device per reading. That call returns every counter at once (~22 µs
on an H200), whereas ``torch.cuda.memory_allocated()`` and its siblings each
rebuild and flatten the same dict (~118 µs apiece).

Tests, which run without a GPU and maybe without torch, inject a source with
:func:`set_source`; everything above this module then runs for real.

Nothing here imports torch on its own: the agent thread only looks at
``sys.modules``, so a process that never imported torch pays nothing and a
half-finished import in another thread is never touched.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from . import _direct


class Counters(NamedTuple):
    """One reading of a device's caching allocator, in bytes / counts."""

    allocated: int  # allocated_bytes.all.current
    reserved: int  # reserved_bytes.all.current
    peak: int  # allocated_bytes.all.peak
    reserved_peak: int  # reserved_bytes.all.peak
    inactive: int  # inactive_split_bytes.all.current
    alloc_retries: int  # num_alloc_retries
    ooms: int  # num_ooms


ZERO = Counters(0, 0, 0, 0, 0, 0, 0)


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


def normalize_uuid(u: Any) -> str:
    """A device UUID as NVML prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".

    torch gives a bare UUID (str or object) in some versions, 16 raw bytes
    in others, and already "GPU-..." / "MIG-..." in others.
    """
    if u is None:
        return ""
    if isinstance(u, (bytes, bytearray)):
        h = bytes(u).hex()
    else:
        s = str(u).strip()
        low = s.lower()
        if low.startswith(("gpu-", "mig-")):
            return s[:3].upper() + s[3:].lower()
        h = low.replace("-", "")
        if h.startswith("{") and h.endswith("}"):
            h = h[1:-1]
    if len(h) != 32 or any(c not in "0123456789abcdef" for c in h):
        return str(u)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class Source:
    """What the rest of the package needs from torch. Every method may raise;
    callers in the agent thread catch."""

    def available(self, import_torch: bool = True) -> bool:
        """CUDA can be used by this process."""
        raise NotImplementedError

    def devices(self) -> list[int]:
        """Indices of the devices this process has initialised (cheap)."""
        raise NotImplementedError

    def info(self, index: int) -> dict[str, Any]:
        """{index, uuid, name, total} of one device, for hello."""
        raise NotImplementedError

    def read(self, index: int) -> Counters:
        """One reading of one device's allocator: in place where the direct
        reading is trusted and the counters held still, else a stats call."""
        c = self._read_in_place(index)
        return c if c is not None else counters(self.read_raw(index))

    def _read_in_place(self, index: int) -> Counters | None:
        direct = self._in_place
        c = direct.read(index) if direct is not None else None
        return Counters(*c) if c is not None else None

    def read_raw(self, index: int) -> Mapping[str, Any]:
        """The stats mapping read() takes its counters from: one stats call."""
        raise NotImplementedError

    # The direct reading of the allocator's counters, once set up (_direct).
    _in_place: _direct.Direct | None = None

    def tick_readers(self, devs: Sequence[int]) -> tuple[tuple[int, Callable[[], Any]], ...]:
        """(device, reader) pairs for the agent thread's tick: a reader
        returns what counters() takes, and the tick only stores it, so the
        counters are picked out at send time with the code warm. A copy of
        the allocator's counters where the direct reading is trusted, else
        the stats call's dict."""
        direct = self._in_place
        views = direct.views if direct is not None else {}
        read = self.read_raw
        return tuple((d, views[d].tobytes) if d in views else (d, functools.partial(read, d))
                     for d in devs)

    def maintain(self, devs: Sequence[int]) -> None:
        """Set up and check the direct reading; the agent thread calls this
        about once a second with the initialised devices."""
        d = self._in_place
        if d is not None:
            d.maintain(devs)

    def reading(self) -> str:
        """How the tick reads the allocator: "direct", or "stats call" and why."""
        d = self._in_place
        return d.state if d is not None else "stats call"

    def current(self) -> int | None:
        """The current device index, or None before CUDA is initialised."""
        raise NotImplementedError

    def torch_version(self) -> str:
        return ""

    def synchronize(self, index: int) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def reset_peak(self, index: int) -> None:
        pass

    def ipc_collect(self) -> None:
        pass

    def clear_workspaces(self) -> bool:
        """Free torch's cuBLAS/cuBLASLt workspaces; False where torch cannot."""
        return False

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        """The allocator's live blocks on a device: (address, size, size
        asked for); None where they cannot be read."""
        return None

    def workspace_sizes(self, index: int) -> set[int]:
        """The sizes torch gives its cuBLAS/cuBLASLt workspaces on a device."""
        return set()

    def oom_observer(self, cb: Callable[[int, int, int, int], None]) -> bool:
        """Register cb(device, alloc, device_limit, device_free) for CUDA
        out-of-memory errors (device_limit: the device's total memory, or
        the per-process fraction of it); True when registered."""
        return False

    def memory_api(self) -> Any:
        """torch.cuda.memory once CUDA is initialised (its allocation
        history and memory snapshots: _history, _dumps), else None."""
        return None


def _torch(import_torch: bool) -> Any:
    m = sys.modules.get("torch")
    if m is None and import_torch:
        try:
            import torch as m  # noqa: PLC0415 - optional dependency
        except Exception:
            return None
    return m


class TorchSource(Source):
    """torch's CUDA caching allocator."""

    def __init__(self) -> None:
        self._info: dict[int, dict[str, Any]] = {}
        # torch._C._cuda_memoryStats once CUDA is initialised: the agent
        # thread reads 100 times a second and every microsecond it holds
        # the GIL is taken from the training thread. Forgotten in a forked
        # child, where CUDA cannot be used (_after_fork).
        self._memstats: Callable[[int], Mapping[str, Any]] | None = None
        # (device indices, _cuda_hasPrimaryContext) once CUDA is initialised:
        # snapshot() asks for the device list at every call, often after a
        # pause, when each Python call costs the most
        self._devprobe: tuple[range, Callable[[int], bool]] | None = None

    def forget(self) -> None:
        self._in_place = None
        self._memstats = None
        self._devprobe = None
        self._info = {}

    def available(self, import_torch: bool = True) -> bool:
        t = _torch(import_torch)
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
        f = self._memstats
        if f is None:
            t = self._initialized()
            if t is None:
                return {}
            f = self._memstats = t._C._cuda_memoryStats
        return f(index)

    def read(self, index: int) -> Counters:
        # snapshot()'s path, usually taken cold: one Python frame fewer
        c = self._read_in_place(index)
        if c is not None:
            return c
        f = self._memstats
        return counters(f(index) if f is not None else self.read_raw(index))

    def maintain(self, devs: Sequence[int]) -> None:
        d = self._in_place
        if d is None:
            t = self._initialized()
            if t is None or not devs:
                return
            d = self._in_place = _direct.Direct(_direct.torch_root(t), t.cuda.device_count,
                                                self.read_raw)
        d.maintain(devs)

    def current(self) -> int | None:
        t = self._initialized()
        return None if t is None else int(t.cuda.current_device())

    def torch_version(self) -> str:
        t = _torch(False)
        return str(getattr(t, "__version__", "")) if t is not None else ""

    def synchronize(self, index: int) -> None:
        t = self._initialized()
        if t is not None:
            t.cuda.synchronize(index)

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

    def clear_workspaces(self) -> bool:
        t = self._initialized()
        clear = getattr(t._C, "_cuda_clearCublasWorkspaces", None) if t is not None else None
        if clear is None:
            return False
        clear()
        return True

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        t = self._initialized()
        if t is None:
            return None
        out = []
        for seg in t.cuda.memory._snapshot()["segments"]:
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

    def oom_observer(self, cb: Callable[[int, int, int, int], None]) -> bool:
        # The allocator keeps observers per device and only has devices after
        # CUDA's lazy init, so this must wait until CUDA is initialised.
        t = self._initialized()
        attach = getattr(t._C, "_cuda_attach_out_of_memory_observer", None) if t else None
        if attach is None:
            return False
        attach(cb)
        return True

    def memory_api(self) -> Any:
        t = self._initialized()
        return t.cuda.memory if t is not None else None


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


class InjectedSource(Source):
    """A source driven by tests: stats(i) returns a torch-shaped stats dict."""

    def __init__(
        self,
        stats: Callable[[int], Mapping[str, Any]],
        devices: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]],
        *,
        synchronize: Callable[[int], None] | None = None,
        empty_cache: Callable[[], None] | None = None,
        reset_peak: Callable[[int], None] | None = None,
        ipc_collect: Callable[[], None] | None = None,
        torch_version: str = "",
        allocator_root: Callable[[], int | None] | None = None,
        clear_workspaces: Callable[[], None] | None = None,
        blocks: Callable[[int], list[tuple[int, int, int]] | None] | None = None,
        workspace_sizes: Callable[[int], set[int]] | None = None,
        memory: Any = None,
    ) -> None:
        self._stats = stats
        self._devices = devices
        self._hooks = {
            "synchronize": synchronize, "empty_cache": empty_cache,
            "reset_peak": reset_peak, "ipc_collect": ipc_collect,
        }
        self._clear_workspaces = clear_workspaces
        self._blocks = blocks
        self._workspace_sizes = workspace_sizes
        self._torch_version = torch_version
        self._memory = memory
        self.oom_callbacks: list[Callable[[int, int, int, int], None]] = []
        if allocator_root is not None:
            # the direct reading, over memory the test laid out as torch's
            self._in_place = _direct.Direct(allocator_root, lambda: len(self._list()), stats)

    def _list(self) -> list[dict[str, Any]]:
        d = self._devices() if callable(self._devices) else self._devices
        return [dict(x) for x in d]

    def available(self, import_torch: bool = True) -> bool:
        return True

    def devices(self) -> list[int]:
        return [int(d["index"]) for d in self._list()]

    def info(self, index: int) -> dict[str, Any]:
        for d in self._list():
            if int(d["index"]) == index:
                return {"index": index, "uuid": normalize_uuid(d.get("uuid")),
                        "name": str(d.get("name", "")), "total": int(d.get("total", 0))}
        raise KeyError(f"no device {index}")

    def read_raw(self, index: int) -> Mapping[str, Any]:
        return self._stats(index)

    def current(self) -> int | None:
        devs = self.devices()
        return devs[0] if devs else None

    def torch_version(self) -> str:
        return self._torch_version

    def _call(self, name: str, *args: Any) -> None:
        h = self._hooks[name]
        if h is not None:
            h(*args)

    def synchronize(self, index: int) -> None:
        self._call("synchronize", index)

    def empty_cache(self) -> None:
        self._call("empty_cache")

    def reset_peak(self, index: int) -> None:
        self._call("reset_peak", index)

    def ipc_collect(self) -> None:
        self._call("ipc_collect")

    def clear_workspaces(self) -> bool:
        if self._clear_workspaces is None:
            return False
        self._clear_workspaces()
        return True

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        return self._blocks(index) if self._blocks is not None else None

    def workspace_sizes(self, index: int) -> set[int]:
        return self._workspace_sizes(index) if self._workspace_sizes is not None else set()

    def oom_observer(self, cb: Callable[[int, int, int, int], None]) -> bool:
        self.oom_callbacks.append(cb)
        return True

    def memory_api(self) -> Any:
        return self._memory if self._memory is not None and self._list() else None

    def oom(self, device: int, alloc: int, device_limit: int, device_free: int) -> None:
        """Call the registered observers as torch's allocator would on OOM."""
        for cb in list(self.oom_callbacks):
            cb(device, alloc, device_limit, device_free)


_lock = threading.Lock()
_source: Source = TorchSource()


def source() -> Source:
    """The source in use."""
    return _source


def set_source(
    stats: Callable[[int], Mapping[str, Any]] | None,
    devices: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] = (),
    **hooks: Any,
) -> Source:
    """Replace torch with stats(i) -> torch-shaped stats dict, for tests.

    devices lists {index, uuid, name, total} (or is a callable returning such
    a list, to simulate devices being initialised later). Keyword hooks:
    synchronize(i), empty_cache(), reset_peak(i), ipc_collect(),
    clear_workspaces(), blocks(i) (live blocks: (address, size, asked)),
    workspace_sizes(i), torch_version, memory (what stands for
    torch.cuda.memory: _record_memory_history, _snapshot, ...), and
    allocator_root(): the address of
    an object laid out as torch's native allocator, for the direct reading
    (_direct).
    stats=None restores torch. Returns the new source.
    """
    global _source
    with _lock:
        _source = TorchSource() if stats is None else InjectedSource(stats, devices, **hooks)
        return _source


def _after_fork() -> None:
    s = _source
    if isinstance(s, TorchSource):
        s.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
