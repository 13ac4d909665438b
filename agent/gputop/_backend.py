"""What a framework gives the agent: the backend interface, and the backend
this process uses.

The agent sees a framework's allocator through one Backend and nothing
else. A framework must provide the devices this process has initialised
(devices(), info(): index, GPU UUID, name, total memory, so that gputop
maps them to NVML's devices) and each device's allocator counters
(read_raw() and counters(), read() from them). Everything else is an
optional extra with a do-nothing default: the release steps of cleanup(),
the peak reset, an out-of-memory hook, allocation history and memory dumps
(History), what the holders walk needs (live blocks, workspace sizes,
the walk itself), and the allocator's layout (its segments and blocks
summed: layouts(), layout_size()).

torch's backend is _torch's; the tests' fake GPU (tests/fakegpu.py) is
another. A JAX or CuPy backend is a module beside _torch, installed here.

Nothing here imports a framework.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable, NamedTuple, Sequence


class Counters(NamedTuple):
    """One reading of a device's allocator, in bytes / counts (torch's
    names: allocated_bytes.all.current, reserved_bytes.all.current,
    allocated_bytes.all.peak, reserved_bytes.all.peak,
    inactive_split_bytes.all.current, num_alloc_retries, num_ooms)."""

    allocated: int
    reserved: int
    peak: int
    reserved_peak: int
    inactive: int
    alloc_retries: int
    ooms: int


ZERO = Counters(0, 0, 0, 0, 0, 0, 0)


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


class Unsupported(Exception):
    """The framework cannot do this in this installation (a torch without
    the call): said once, not tried again."""


class Step(NamedTuple):
    """One of a framework's release steps in cleanup(), in its order."""

    name: str  # as cleanup() lists it ("empty_cache")
    run: Callable[[], Any]  # returns False when the framework has no such call: it did not run
    measured: bool = True  # what it released is measured and listed (a peak reset is not)


class History:
    """A framework's allocation history and dump data (torch.cuda.memory's:
    _torch.TorchHistory). _history turns the recording on and off and
    labels it; _dumps writes the dump."""

    def why_not(self) -> str:
        """Why this process cannot record history ("" when it can)."""
        return "this framework keeps no allocation history"

    def record(self, max_entries: int) -> str:
        """Record the last max_entries allocator events, with Python stacks;
        "" once on, else why it failed."""
        return self.why_not()

    def stop(self) -> None:
        """Stop recording."""

    def labeller(self) -> Callable[[str], None] | None:
        """What labels the calling thread's next allocations, where the
        framework keeps such a label."""
        return None

    def dump_state(self) -> Any:
        """Every live block (with its stack while history is on) and the
        history: what a dump writes."""
        raise NotImplementedError("this framework cannot dump its memory")

    def prepare(self) -> bool:
        """Import, in the calling thread, what dump_state() would import
        (Backend.snapshot_imports), so that the dump's phases show it;
        whether there was anything to import."""
        return False


Reader = Callable[[], Any]


class Backend:
    """A framework's allocator as the agent sees it. Every method may
    raise; the agent catches. This base is "no framework": no devices."""

    # the holders walk attributes a device's blocks when it walks tensors
    # of these (torch) device types
    tensor_device_types: frozenset[str] = frozenset({"cuda"})

    # ---- what a framework must provide ----

    def devices(self) -> list[int]:
        """Indices of the devices this process has initialised (cheap: the
        agent asks once a second, snapshot() at each call)."""
        return []

    def info(self, index: int) -> dict[str, Any]:
        """{index, uuid (normalize_uuid's), name, total} of one device, for hello."""
        raise KeyError(f"no device {index}")

    def read_raw(self, index: int) -> Any:
        """One reading of a device's allocator, as cheap as it can be taken:
        the agent thread's tick keeps it as it is and counters() picks the
        figures out at send time."""
        raise KeyError(f"no device {index}")

    def counters(self, raw: Any) -> Counters:
        """The figures of a reading read_raw() (or a tick reader) took."""
        return ZERO

    # ---- readings, with defaults a framework may better ----

    def read(self, index: int) -> Counters:
        """One device's counters now (snapshot(), an OOM, cleanup())."""
        return self.counters(self.read_raw(index))

    def tick_readers(self, devs: Sequence[int]) -> tuple[tuple[int, Reader], ...]:
        """(device, reader) pairs for the agent thread's tick: a reader
        returns what counters() takes. The tick calls them as they are, at
        the sampling rate: each should be one call, bound beforehand."""
        read = self.read_raw
        return tuple((d, functools.partial(read, d)) for d in devs)

    def maintain(self, devs: Sequence[int]) -> None:
        """The agent thread's once-a-second call with the initialised devices."""

    def reading(self) -> str:
        """How the tick reads the allocator, for status()."""
        return "stats call"

    def available(self, import_module: bool = True) -> bool:
        """The framework can use a GPU in this process (import_module: it
        may be imported to find out)."""
        return False

    def current(self) -> int | None:
        """The current device index, or None before any is initialised."""
        devs = self.devices()
        return devs[0] if devs else None

    def version(self) -> str:
        """The framework's version, for hello."""
        return ""

    def at_init(self, fn: Callable[[], None]) -> str:
        """Run fn once the framework has initialised its devices: now when
        it has (or cannot tell), else from inside its initialisation (torch's
        lazy CUDA init). "" when fn ran or will run, else why it cannot."""
        fn()
        return ""

    def init_reading(self) -> tuple[int, Counters]:
        """The device being initialised and its counters, from inside the
        initialisation (at_init's fn), where devices() may not see it yet."""
        devs = self.devices()
        dev = devs[0] if devs else (self.current() or 0)
        return dev, self.read(dev)

    def forget(self) -> None:
        """In a forked child: drop what was learnt of the parent's devices."""

    # ---- optional extras ----

    def cleanup_steps(self, devs: Sequence[int], reset_peak: bool) -> list[Step]:
        """cleanup()'s steps after gc.collect(), for devices devs; with
        reset_peak the peak counters restart among them."""
        return []

    def reset_peak(self, index: int) -> None:
        """Restart a device's peak counters from what is allocated now."""

    def watch_ooms(self, cb: Callable[[int, int, int, int], None], initialising: bool = False) -> bool:
        """Have cb(device, asked, device_limit, device_free) called in the
        failing thread at each out-of-memory error, before the framework
        raises; True once it will be. initialising: called from at_init's
        fn, inside the framework's initialisation."""
        return False

    def history(self, initialising: bool = False) -> History | None:
        """Allocation history and dumps, once the devices are
        initialised; None where there are none (yet). initialising: called
        from at_init's fn, inside the framework's initialisation, before
        its first allocation (where devices() may not list them yet)."""
        return None

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        """The allocator's live blocks on a device: (address, size, size
        asked for), sorted; None where they cannot be read."""
        return None

    def workspace_sizes(self, index: int) -> set[int]:
        """The sizes of the blocks the framework keeps for its libraries'
        workspaces (torch's cuBLAS/cuBLASLt), which no tensor owns."""
        return set()

    def held_at(self, dev: int) -> dict[str, Any] | None:
        """An end row's attribution of device dev (wire.Held), from a holders
        walk in the calling thread; None where the framework has no walk
        (ImportError where this installation lacks it)."""
        return None

    def row_walk(self, devs: Sequence[int], held: bool, ledger: bool) -> dict[int, dict[str, Any]] | None:
        """One holders walk for a row, in the calling thread: for each device
        of devs, "held" (an end row's attribution, wire.Held) when held and
        "ledger" (wire.Ledger: what its allocated bytes are made of) when
        ledger; None where the framework has no walk (ImportError where
        this installation lacks it). This default has held_at's attribution
        and no ledger."""
        if not held:
            return None
        out: dict[int, dict[str, Any]] = {}
        for d in devs:
            h = self.held_at(d)
            if h is None:
                return None
            out[d] = {"held": h}
        return out

    def holders_report(self, dev: int | None) -> dict[str, Any] | None:
        """The holders frame's report (wire.Holders without type, t, id) for
        device dev, else the current one; None where there is no walk."""
        return None

    def limit(self, index: int) -> int | None:
        """The most the framework may hold on a device: its total, or less
        under a per-process cap (torch's set_per_process_memory_fraction);
        None where it cannot say. Cheap: read with every row."""
        return None

    def layout_size(self, index: int) -> tuple[int, int] | None:
        """(segments, blocks at most) of a device's allocator, from its
        cheap counters: what a layouts() reading will cost is predicted
        from it. None where the framework does not count them."""
        return None

    def layouts(self, devs: Sequence[int], state: Any = None) -> dict[int, dict[str, Any]] | None:
        """The allocator's layout of each device of devs, read at once
        (wire.Layout without t and took_ms; settings included where the
        framework reports them); None where the framework has none.
        state: dump data taken already (History.dump_state()), which holds
        the layout: read from it instead of asking the framework again.
        Raises Unsupported when this installation cannot read it."""
        return None

    def layout_note(self) -> str:
        """What this installation's layout reading lacks ("" when nothing)."""
        return ""

    def snapshot_imports(self) -> str:
        """Why the framework's memory snapshot (layouts(), blocks(), a
        dump's data) would import modules the program has not imported
        yet, said in a sentence; "" when it would not. gputop then reads
        none of its own accord (an import from its thread can meet the
        program's own import of the same modules half way and break it);
        a dump the user asks for, or an OOM's, is still taken."""
        return ""

    def memory_info(self, index: int) -> tuple[int, int]:
        """(free, total) bytes of a device as the driver counts them, from
        inside the initialisation too (at_init's fn)."""
        raise Unsupported("this framework cannot say how much of the device is free")

    def cap_memory(self, index: int, cap: int, total: int) -> None:
        """Let the allocator hold at most cap of the device's total bytes:
        past it an allocation fails with the framework's out-of-memory
        error (and the OOM observer sees the cap as the limit)."""
        raise Unsupported("this framework cannot cap the memory it takes")


# ---- the backend this process uses ----

_lock = threading.Lock()
_current: Backend = Backend()  # gputop's __init__ installs torch's


def get() -> Backend:
    """The backend in use."""
    return _current


def install(backend: Backend) -> Backend:
    """Use backend from now on (gputop's __init__: torch's; tests: a fake
    GPU); returns it."""
    global _current
    with _lock:
        _current = backend
        return backend


def _after_fork() -> None:
    for b in (_current, *_frameworks):
        try:
            b.forget()
        except Exception:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# ---- the frameworks beside torch ----

class FrameworkBackend:
    """Another framework's allocator in the same process (JAX's XLA
    allocator: _jax; CuPy's memory pool: _cupy), read beside torch's
    counters and kept apart from them: its figures go out in its own
    names (wire.Framework), never as torch's. Nothing here may import
    the framework: present() looks at sys.modules, and a framework the
    program has not imported, or has not put on a GPU yet, has no devices.
    Every method may raise; the agent catches."""

    name = ""

    def present(self) -> bool:
        """The program has imported the framework."""
        return False

    def devices(self) -> list[int]:
        """CUDA ordinals of the GPUs the framework has initialised (never
        initialising one itself)."""
        return []

    def info(self, index: int) -> dict[str, Any]:
        """{index, uuid, name, total} of one device, for hello."""
        from . import _cudadev
        return _cudadev.describe(index)

    def read(self, index: int, held: bool = False) -> dict[str, Any]:
        """The framework's figures on a device now (wire.Framework: name,
        figures, settings); with held, what holds its memory too (an end
        row's verdict)."""
        raise KeyError(f"no device {index}")

    def version(self) -> str:
        return ""

    def forget(self) -> None:
        """In a forked child: drop what was learnt of the parent's devices."""

    def cleanup_steps(self, devs: Sequence[int]) -> list[Step]:
        """cleanup()'s release steps of this framework after gc.collect(),
        for devices devs; none may drop the user's objects."""
        return []

    def still_live(self, index: int) -> dict[str, Any]:
        """What of the framework's memory is still live on a device after
        a cleanup, beyond its figures (JAX: live arrays and their bytes)."""
        return {}


def figure(of: str, native: str, value: Any) -> dict[str, Any] | None:
    """One figure (wire.Figure) of a framework's counter, None when the
    framework did not report it (absent, never 0)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    f: dict[str, Any] = {"native": native, "value": int(value)}
    if of:
        f["of"] = of
    return f


_frameworks: list[FrameworkBackend] = []  # gputop's __init__ adds JAX's and CuPy's


def frameworks() -> list[FrameworkBackend]:
    """The frameworks beside torch the agent looks for."""
    return list(_frameworks)


def add_framework(fb: FrameworkBackend) -> FrameworkBackend:
    """Look for framework fb too (gputop's __init__: JAX, CuPy)."""
    with _lock:
        _frameworks[:] = [f for f in _frameworks if f.name != fb.name] + [fb]
    return fb


def framework_devices() -> dict[int, list[FrameworkBackend]]:
    """Each device the frameworks beside torch have initialised, with
    those that have; cheap when none was imported."""
    out: dict[int, list[FrameworkBackend]] = {}
    for fb in _frameworks:
        try:
            if not fb.present():
                continue
            for d in fb.devices():
                out.setdefault(int(d), []).append(fb)
        except Exception:
            continue
    return out


def read_frameworks(fbs: Sequence[FrameworkBackend], index: int, held: bool = False) -> list[dict[str, Any]]:
    """The figures of each of fbs on a device (wire.Framework); one that
    raises is left out."""
    out = []
    for fb in fbs:
        try:
            out.append(fb.read(index, held))
        except Exception:
            continue
    return out
