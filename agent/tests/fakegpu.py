"""A pretend CUDA caching allocator for tests: it keeps torch's counters the
way torch does (peaks, reserved rounded to 2 MiB segments, empty_cache,
reset_peak_memory_stats) and is injected with gputop._stats.set_source, so
everything above the stats call runs for real on a machine without a GPU."""

from __future__ import annotations

import threading
from typing import Any

from gputop import _stats

MiB = 1 << 20
SEGMENT = 2 * MiB

UUIDS = [
    # as torch reports them in some versions: no "GPU-" prefix
    "6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b",
    "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6",
]


class FakeGPU:
    def __init__(self, ndev: int = 1, initialised: int | None = None) -> None:
        self.lock = threading.Lock()
        self.ndev = ndev
        self.initialised = ndev if initialised is None else initialised
        self.c = [dict(allocated=0, reserved=0, peak=0, reserved_peak=0, inactive=0,
                       retries=0, ooms=0) for _ in range(ndev)]
        self.calls = 0
        self.log: list[str] = []
        self.source: Any = None

    # ---- the allocator ----

    def alloc(self, dev: int, n: int) -> None:
        with self.lock:
            c = self.c[dev]
            c["allocated"] += n
            need = -(-c["allocated"] // SEGMENT) * SEGMENT
            if need > c["reserved"]:
                c["reserved"] = need
            c["inactive"] = c["reserved"] - c["allocated"]
            c["peak"] = max(c["peak"], c["allocated"])
            c["reserved_peak"] = max(c["reserved_peak"], c["reserved"])

    def free(self, dev: int, n: int) -> None:
        with self.lock:
            c = self.c[dev]
            c["allocated"] -= n
            c["inactive"] = c["reserved"] - c["allocated"]

    def set(self, dev: int, **kw: int) -> None:
        with self.lock:
            self.c[dev].update(kw)

    # ---- what torch offers ----

    def stats(self, i: int) -> dict[str, Any]:
        """Shaped like torch._C._cuda_memoryStats(i)."""
        with self.lock:
            self.calls += 1
            c = dict(self.c[i])

        def stat(cur: int, peak: int) -> dict[str, Any]:
            return {"all": {"current": cur, "peak": peak, "allocated": 0, "freed": 0},
                    "small_pool": {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
                    "large_pool": {"current": cur, "peak": peak, "allocated": 0, "freed": 0}}

        return {
            "allocated_bytes": stat(c["allocated"], c["peak"]),
            "reserved_bytes": stat(c["reserved"], c["reserved_peak"]),
            "inactive_split_bytes": stat(c["inactive"], c["inactive"]),
            "active_bytes": stat(c["allocated"], c["peak"]),
            "num_alloc_retries": c["retries"],
            "num_ooms": c["ooms"],
            "num_device_alloc": 0,
        }

    def devices(self) -> list[dict[str, Any]]:
        return [{"index": i, "uuid": UUIDS[i % len(UUIDS)], "name": "Fake H200",
                 "total": 150754820096} for i in range(self.initialised)]

    def empty_cache(self) -> None:
        with self.lock:
            self.log.append("empty_cache")
            for c in self.c:
                c["reserved"] = -(-c["allocated"] // SEGMENT) * SEGMENT
                c["inactive"] = c["reserved"] - c["allocated"]

    def reset_peak(self, i: int) -> None:
        with self.lock:
            self.log.append(f"reset_peak {i}")
            c = self.c[i]
            c["peak"], c["reserved_peak"] = c["allocated"], c["reserved"]

    def synchronize(self, i: int) -> None:
        with self.lock:
            self.log.append(f"synchronize {i}")

    def ipc_collect(self) -> None:
        with self.lock:
            self.log.append("ipc_collect")

    def install(self) -> Any:
        self.source = _stats.set_source(
            self.stats, self.devices, synchronize=self.synchronize,
            empty_cache=self.empty_cache, reset_peak=self.reset_peak,
            ipc_collect=self.ipc_collect, torch_version="2.11.0+fake")
        return self.source

    def oom(self, dev: int, requested: int, limit: int = 150754820096) -> None:
        """What torch does when an allocation fails: count it, call observers
        with the most it may hold on the device (its total, or less under
        set_per_process_memory_fraction)."""
        with self.lock:
            self.c[dev]["ooms"] += 1
            free = 1 * MiB
        self.source.oom(dev, requested, limit, free)
