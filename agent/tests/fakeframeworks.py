"""Pretend JAX and CuPy modules for tests: put in sys.modules as the
program's own `jax` and `cupy`, so the agent's real JAX and CuPy backends
(gputop._jax, gputop._cupy) run against them on a machine without a GPU.

FakeJax keeps XLA's allocator the way memory_stats() reports it: arrays
allocated and freed (bytes_in_use, peak_bytes_in_use, num_allocs,
largest_alloc_size), the BFC pool preallocated at the backend's creation
(pool_bytes = XLA_PYTHON_CLIENT_MEM_FRACTION of the device, 0.75 by
default) or, with XLA_PYTHON_CLIENT_PREALLOCATE=false, grown as arrays
come (bytes_reserved, and no pool_bytes or largest_alloc_size: keys JAX
leaves out are left out); live_arrays(); no backend until
backend_init() (as JAX creates its backend at the first device use).
FakeCuPy keeps a memory pool per device as CuPy's does (used_bytes,
total_bytes, free_bytes, get_limit, free_all_blocks), with cuda.Device as
a context manager setting the thread's device."""

from __future__ import annotations

import os
import sys
import threading
import types
import weakref
from typing import Any

try:  # the UUIDs the fakes' devices have; a program gputop run starts imports gputop after them
    from gputop import _cudadev
except ImportError:
    _cudadev = types.SimpleNamespace()

TOTAL = 150754820096  # an H200's bytes
UUIDS = ["GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b", "GPU-d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"]


def fake_describe(index: int) -> dict[str, Any]:
    return {"index": index, "uuid": UUIDS[index % len(UUIDS)], "name": "Fake H200", "total": TOTAL}


class XlaRuntimeError(RuntimeError):
    """jaxlib's error, as JAX raises it when XLA runs out of memory."""


XlaRuntimeError.__module__ = "jaxlib.xla_extension"


class CuPyOutOfMemoryError(MemoryError):
    pass


CuPyOutOfMemoryError.__name__ = CuPyOutOfMemoryError.__qualname__ = "OutOfMemoryError"
CuPyOutOfMemoryError.__module__ = "cupy.cuda.memory"


class FakeDevice:
    platform = "gpu"
    device_kind = "NVIDIA H200"

    def __init__(self, jax: "FakeJax", i: int) -> None:
        self.jax, self.id, self.local_hardware_id = jax, i, i
        self.in_use = self.peak = self.num_allocs = self.largest = self.reserved = 0
        self.pool = 0

    def memory_stats(self) -> dict[str, int]:
        s = {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.peak, "num_allocs": self.num_allocs,
             "bytes_limit": self.jax.limit()}
        if self.jax.preallocate:
            s["pool_bytes"] = self.pool
            s["peak_pool_bytes"] = self.pool
            s["largest_alloc_size"] = self.largest
        else:
            s["bytes_reserved"] = self.reserved
        return s


class FakeArray:
    def __init__(self, dev: FakeDevice, shape: tuple[int, ...], dtype: str, itemsize: int) -> None:
        self.dev, self.shape, self.dtype = dev, shape, dtype
        n = 1
        for x in shape:
            n *= x
        self.nbytes = n * itemsize

    def devices(self) -> set[FakeDevice]:
        return {self.dev}


class FakeJax:
    def __init__(self, ndev: int = 1, adopt: types.ModuleType | None = None) -> None:
        self.preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() not in ("false", "0")
        self.fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
        self.devs = [FakeDevice(self, i) for i in range(ndev)]
        self.arrays: list[Any] = []  # weak in JAX; here the tests free them
        self.weak: list[Any] = []  # weakly held, as JAX holds them: freed when collected
        self.cache: dict[int, int] = {}  # bytes compiled computations keep on each device
        self.cleared = 0  # clear_caches() calls
        self.lock = threading.Lock()
        jax = adopt if adopt is not None else types.ModuleType("jax")
        jax.__version__ = "0.11.0"
        jax.local_devices = self.local_devices
        jax.live_arrays = self.live_arrays
        src = types.ModuleType("jax._src")
        xb = types.ModuleType("jax._src.xla_bridge")
        xb._backends = {}
        self.jax, self.xb = jax, xb
        jax._src = src
        src.xla_bridge = xb
        self.inits = 0  # backend creations: the agent must cause none
        jax.block_until_ready = lambda x: x
        jax.clear_caches = self.clear_caches
        if adopt is not None:  # imported as jax: the rest of it in place
            self.install()

    def limit(self) -> int:
        return int(TOTAL * self.fraction)

    def install(self) -> "FakeJax":
        sys.modules["jax"], sys.modules["jax._src"], sys.modules["jax._src.xla_bridge"] = self.jax, self.jax._src, self.xb
        _cudadev.describe = fake_describe
        return self

    def backend_init(self) -> None:
        if not self.xb._backends:
            self.xb._backends["cuda"] = object()
            if self.preallocate:
                for d in self.devs:
                    d.pool = self.limit()

    def local_devices(self) -> list[FakeDevice]:
        if not self.xb._backends:
            self.inits += 1
            self.backend_init()
        return list(self.devs)

    def live_arrays(self) -> list[FakeArray]:
        with self.lock:
            return list(self.arrays) + [a for a in (w() for w in self.weak) if a is not None]

    def compile(self, dev: int, nbytes: int) -> None:
        """A compiled computation that keeps nbytes of constants on dev
        until clear_caches()."""
        self.backend_init()
        with self.lock:
            self.cache[dev] = self.cache.get(dev, 0) + nbytes
            d = self.devs[dev]
            d.in_use += nbytes
            d.peak = max(d.peak, d.in_use)

    def clear_caches(self) -> None:
        with self.lock:
            self.cleared += 1
            for dev, n in self.cache.items():
                self.devs[dev].in_use -= n
            self.cache = {}

    def _collected(self, d: FakeDevice, nbytes: int) -> None:
        with self.lock:
            d.in_use -= nbytes

    def array(self, dev: int, shape: tuple[int, ...], dtype: str = "float32", weak: bool = False) -> FakeArray:
        """An array on dev; weak: held as JAX holds every array, freed
        once the program's references (a cycle: at gc) are gone."""
        self.backend_init()
        d = self.devs[dev]
        a = FakeArray(d, shape, dtype, 2 if dtype in ("bfloat16", "float16") else 4)
        with self.lock:
            if weak:
                self.weak.append(weakref.ref(a))
                weakref.finalize(a, self._collected, d, a.nbytes)
            else:
                self.arrays.append(a)
            d.in_use += a.nbytes
            d.peak = max(d.peak, d.in_use)
            d.num_allocs += 1
            d.largest = max(d.largest, a.nbytes)
            if not self.preallocate:
                d.reserved = max(d.reserved, d.in_use)
        return a

    def delete(self, a: FakeArray) -> None:
        with self.lock:
            self.arrays.remove(a)
            a.dev.in_use -= a.nbytes


class FakePool:
    """One device's pool, as cupy.cuda.memory.SingleDeviceMemoryPool counts."""

    def __init__(self) -> None:
        self.used = self.total = self.limit = 0


class FakeCuPy:
    def __init__(self, adopt: types.ModuleType | None = None) -> None:
        self.pools: dict[int, FakePool] = {}
        self.local = threading.local()
        cp = adopt if adopt is not None else types.ModuleType("cupy")
        cp.__version__ = "14.2.0"
        cuda = types.ModuleType("cupy.cuda")
        outer = self

        class Device:
            def __init__(self, i: int | None = None) -> None:
                self.id = outer.current() if i is None else i  # cupy.cuda.Device(): the current one

            def __enter__(self) -> "Device":
                self.prev = outer.current()
                outer.local.dev = self.id
                return self

            def __exit__(self, *exc: Any) -> None:
                outer.local.dev = self.prev

        cuda.Device = Device
        cp.cuda = cuda
        cp.get_default_memory_pool = lambda: outer.pool_api
        cp.get_default_pinned_memory_pool = lambda: outer.pinned_api

        class PoolAPI:
            def used_bytes(self) -> int:
                return outer.pool().used

            def total_bytes(self) -> int:
                return outer.pool().total

            def free_bytes(self) -> int:
                return outer.pool().total - outer.pool().used

            def get_limit(self) -> int:
                return outer.pool().limit

            def set_limit(self, size: int) -> None:
                outer.pool().limit = size

            def free_all_blocks(self) -> None:
                outer.pool().total = outer.pool().used

        class PinnedAPI:
            freed = 0  # free_all_blocks() calls

            def n_free_blocks(self) -> int:
                return 0 if self.freed else 3

            def free_all_blocks(self) -> None:
                self.freed += 1

        self.pool_api, self.pinned_api = PoolAPI(), PinnedAPI()
        self.cp, self.cuda = cp, cuda
        if adopt is not None:
            self.install()

    def current(self) -> int:
        return getattr(self.local, "dev", 0)

    def pool(self) -> FakePool:
        return self.pools.setdefault(self.current(), FakePool())

    def install(self) -> "FakeCuPy":
        sys.modules["cupy"], sys.modules["cupy.cuda"] = self.cp, self.cuda
        _cudadev.describe = fake_describe
        return self

    def alloc(self, n: int) -> None:
        p = self.pool()
        p.used += n
        # the pool rounds to 512 bytes and keeps what was freed
        p.total = max(p.total, (p.used + 511) // 512 * 512)

    def free(self, n: int) -> None:
        self.pool().used -= n
