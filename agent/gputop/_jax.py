"""JAX's backend: XLA's GPU allocator as Device.memory_stats() reports it,
beside torch's counters and apart from them.

Its figures go out in JAX's own names (wire.Framework): bytes_in_use is
gputop's in-use figure, pool_bytes (the preallocated pool of XLA's BFC
allocator; bytes_reserved where there is no pool_bytes) its reserved,
peak_bytes_in_use its peak, bytes_limit its limit; the rest
(largest_alloc_size, num_allocs, ...) as they are. A key memory_stats()
lacks is left out, never sent as 0. The XLA_PYTHON_CLIENT_* variables
in force (read from this process's environment) go with them: the
preallocation they decide is why NVML counts a JAX process at 75% of the
GPU whatever it does.

Never imports jax, and never initialises its backend: a device is read
only once the program's JAX has created its GPU backend
(jax._src.xla_bridge's backends), so attaching costs the program nothing
it would not have done.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Sequence

from . import _backend
from ._backend import figure

# memory_stats() keys mapped onto gputop's figures, in the order tried
MAPPED = (
    ("in_use", ("bytes_in_use",)),
    ("reserved", ("pool_bytes", "bytes_reserved")),
    ("peak", ("peak_bytes_in_use",)),
    ("limit", ("bytes_limit",)),
)
# the others sent as they are, when present
EXTRA = ("bytes_reserved", "peak_pool_bytes", "peak_bytes_reserved", "largest_alloc_size",
         "num_allocs", "largest_free_block_bytes", "bytes_reservable_limit")
SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
MAX_GROUPS = 16  # live-array groups an end row carries (wire.MaxFrameworkHeld)
MAX_ARRAYS = 100_000  # live arrays looked at by one reading of what holds memory


def stats_figures(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """memory_stats()'s dict as wire.Figures, in JAX's names."""
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    for of, keys in MAPPED:
        for k in keys:
            f = figure(of, k, stats.get(k))
            if f is not None:
                out.append(f)
                used.add(k)
                break
    for k in EXTRA:
        if k not in used:
            f = figure("", k, stats.get(k))
            if f is not None:
                out.append(f)
    return out


def settings() -> list[dict[str, str]]:
    """The XLA_PYTHON_CLIENT_* settings as this process has them ("": unset)."""
    import os
    return [{"name": k, "value": os.environ.get(k, "")} for k in SETTINGS]


class JaxBackend(_backend.FrameworkBackend):
    name = "jax"

    def __init__(self) -> None:
        # JAX's GPU devices once its backend exists (they do not change
        # after): the agent's readings skip asking JAX for them each time
        self._devs: dict[int, Any] = {}

    def forget(self) -> None:
        self._devs = {}

    def _gpus(self) -> dict[int, Any]:
        if self._devs:
            return self._devs
        jax = sys.modules.get("jax")
        xb = sys.modules.get("jax._src.xla_bridge")
        if jax is None or xb is None:
            return {}
        backends = getattr(xb, "_backends", None)
        if not backends:
            return {}  # JAX has not created a backend yet: asking would create one
        out = {}
        for d in jax.local_devices():
            if getattr(d, "platform", "") in ("gpu", "cuda", "rocm"):
                hw = getattr(d, "local_hardware_id", None)  # the CUDA ordinal, as torch numbers it
                out[int(hw if hw is not None else d.id)] = d
        self._devs = out
        return out

    def present(self) -> bool:
        return "jax" in sys.modules

    def devices(self) -> list[int]:
        return sorted(self._gpus())

    def info(self, index: int) -> dict[str, Any]:
        got = super().info(index)
        d = self._gpus().get(index)
        if d is not None and got.get("name", "").startswith("cuda:"):
            got["name"] = str(getattr(d, "device_kind", got["name"]))
        return got

    def version(self) -> str:
        return str(getattr(sys.modules.get("jax"), "__version__", ""))

    def read(self, index: int, held: bool = False) -> dict[str, Any]:
        d = self._gpus()[index]
        stats = d.memory_stats() or {}
        f: dict[str, Any] = {"name": self.name, "figures": stats_figures(stats), "settings": settings()}
        if held:
            f["held"] = live_arrays(index)
        return f

    def cleanup_steps(self, devs: Sequence[int]) -> list[_backend.Step]:
        # the caches of compiled computations (and the constants they keep
        # on the device); never an array of the user's. XLA's pool itself
        # stays: JAX has no call that returns it to the device.
        fn = getattr(sys.modules.get("jax"), "clear_caches", None)

        def clear() -> Any:
            if fn is None:
                return False  # a JAX before clear_caches(): the step did not run
            fn()
            return None

        return [_backend.Step("jax.clear_caches", clear)]

    def still_live(self, index: int) -> dict[str, Any]:
        groups, count, nbytes = _live(index)
        return {"live_arrays": count, "live_array_bytes": nbytes, "held": groups}


def live_arrays(index: int, frame: Any = None) -> list[dict[str, Any]]:
    """jax.live_arrays() on device index grouped (wire.HolderGroup): by the
    Python variable that holds them where the calling thread's frames (or
    those from frame) or __main__ name one, else by shape and dtype;
    largest first."""
    return _live(index, frame)[0]


def _live(index: int, frame: Any = None) -> tuple[list[dict[str, Any]], int, int]:
    """live_arrays()'s groups (at most MAX_GROUPS), with the count and
    bytes of every live array on the device (all, beyond the groups
    kept). At most MAX_ARRAYS arrays are looked at; past it a group says
    how many were not."""
    jax = sys.modules.get("jax")
    if jax is None:
        return [], 0, 0
    names = _variable_names(frame)
    groups: dict[str, dict[str, Any]] = {}
    count = total = seen = 0
    arrays = jax.live_arrays()
    for a in arrays:
        seen += 1
        if seen > MAX_ARRAYS:
            break
        try:
            devs = [getattr(x, "local_hardware_id", None) for x in a.devices()]
            if index not in devs:
                continue
            nbytes = int(a.nbytes) // max(1, len(devs))
            shape = f"{a.dtype}[{', '.join(str(n) for n in a.shape)}]"
            var, varname = names.get(id(a), ("", ""))
            key = var or shape
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"kind": "variable" if var else "live_arrays", "name": key,
                                   "bytes": 0, "tensors": 0, "examples": [shape],
                                   "hint": f"del {varname}" if var else
                                   "JAX frees an array once nothing references it: drop the references"}
            g["bytes"] += nbytes
            g["tensors"] += 1
            count += 1
            total += nbytes
        except Exception:
            continue
    out = sorted(groups.values(), key=lambda g: -g["bytes"])[:MAX_GROUPS]
    if seen > MAX_ARRAYS:
        n = len(arrays) - MAX_ARRAYS if hasattr(arrays, "__len__") else 0
        out = out[:MAX_GROUPS - 1] + [{
            "kind": "other", "name": "arrays not looked at", "bytes": 0, "tensors": max(n, 0),
            "hint": f"gputop looks at the first {MAX_ARRAYS} of jax.live_arrays(); the figures count those"}]
    return out, count, total


def _variable_names(frame: Any = None) -> dict[int, tuple[str, str]]:
    """id(object) -> (how a row names the variable holding it, its name):
    __main__'s globals ("params"), then the frames from frame (default:
    the caller's caller's in the calling thread; the main thread's from
    another thread), innermost first ("x in train()")."""
    out: dict[int, tuple[str, str]] = {}
    try:
        main = sys.modules.get("__main__")
        for k, v in vars(main).items() if main is not None else ():
            out.setdefault(id(v), (k, k))
        f: Any = frame
        if f is None and threading.current_thread() is not threading.main_thread():
            # the agent thread answering gputop: the program's own frames
            f = sys._current_frames().get(threading.main_thread().ident or 0)
        elif f is None:
            f = sys._getframe(3)
        while f is not None:
            if f.f_code.co_name != "<module>":
                for k, v in f.f_locals.items():
                    out.setdefault(id(v), (f"{k} in {f.f_code.co_name}()", k))
            f = f.f_back
    except Exception:
        pass
    return out
