"""CuPy's backend: its default memory pool as the pool itself counts it,
beside torch's counters and apart from them.

Figures in CuPy's names (wire.Framework): used_bytes() is gputop's
in-use, total_bytes() its reserved (what the pool holds from the
device), the pool's limit (get_limit(), when one is set) its limit;
free_bytes() as it is, and the pinned (host) pool apart, by its own
names. An end row's verdict says what the pool holds free and that
free_all_blocks() returns it.

Never imports cupy and never makes a CUDA context: the pool's methods
count in Python, and a device is read from the agent's thread only when
it is the calling thread's current device, or torch has initialised it,
or CuPy's pool has held memory on it before.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from . import _backend
from ._backend import figure


def pool_figures(pool: Any, pinned: Any = None) -> list[dict[str, Any]]:
    """A memory pool's figures (wire.Figures), in CuPy's names."""
    out = [figure("in_use", "used_bytes", pool.used_bytes()),
           figure("reserved", "total_bytes", pool.total_bytes()),
           figure("", "free_bytes", pool.free_bytes())]
    try:
        lim = pool.get_limit()
        if lim:
            out.append(figure("limit", "get_limit", lim))  # 0: no limit set
    except Exception:
        pass
    if pinned is not None:  # host memory: apart from the device's figures
        for name in ("used_bytes", "total_bytes", "n_free_blocks"):
            fn = getattr(pinned, name, None)
            if callable(fn):
                try:
                    out.append(figure("", "pinned_" + name, fn()))
                except Exception:
                    pass
    return [f for f in out if f is not None]


class CuPyBackend(_backend.FrameworkBackend):
    name = "cupy"

    def __init__(self) -> None:
        self._seen: set[int] = set()  # the devices whose pool has held memory

    def _cupy(self) -> Any:
        return sys.modules.get("cupy")

    def present(self) -> bool:
        return "cupy" in sys.modules

    def _read(self, index: int) -> tuple[Any, Any]:
        cp = self._cupy()
        pool = cp.get_default_memory_pool()
        pinned = cp.get_default_pinned_memory_pool()
        return pool, pinned

    def devices(self) -> list[int]:
        cp = self._cupy()
        if cp is None or "cupy.cuda" not in sys.modules:
            return []
        # the calling thread's current device (cupy.cuda.Device() asks
        # cudaGetDevice: no context made) and those torch has initialised;
        # never another, where entering it would create a CUDA context
        cands = ({cp.cuda.Device().id} | set(_backend.get().devices())) - self._seen
        for i in sorted(cands):
            with cp.cuda.Device(i):
                if cp.get_default_memory_pool().total_bytes() > 0:
                    self._seen.add(i)
        # a device once used stays: after free_all_blocks() its end row
        # still says what the pool holds (nothing)
        return sorted(self._seen)

    def forget(self) -> None:
        self._seen = set()

    def info(self, index: int) -> dict[str, Any]:
        return super().info(index)

    def version(self) -> str:
        return str(getattr(self._cupy(), "__version__", ""))

    def cleanup_steps(self, devs: Sequence[int]) -> list[_backend.Step]:
        # the pools' free blocks back to the device (and the host): the
        # blocks arrays use stay, as they do under torch's empty_cache()
        cp = self._cupy()

        def pool() -> None:
            for d in devs:
                with cp.cuda.Device(d):
                    cp.get_default_memory_pool().free_all_blocks()

        def pinned() -> Any:
            fn = getattr(cp.get_default_pinned_memory_pool(), "free_all_blocks", None)
            if fn is None:
                return False
            fn()
            return None

        return [_backend.Step("get_default_memory_pool().free_all_blocks", pool),
                _backend.Step("get_default_pinned_memory_pool().free_all_blocks", pinned)]

    def read(self, index: int, held: bool = False) -> dict[str, Any]:
        cp = self._cupy()
        with cp.cuda.Device(index):
            pool, pinned = self._read(index)
            return {"name": self.name, "figures": pool_figures(pool, pinned)}
