#!/usr/bin/env python3
"""A CuPy workload (and with --torch, torch beside it on the same GPU) for
frameworks_check.py: arrays made and freed in CuPy's default pool (and
torch's caching allocator), a gputop row at each stage.

    python3 bench/workloads/cupy_work.py [--torch] [--no-agent]
    python3 bench/workloads/cupy_work.py --dry-run [--torch]   (no GPU: the fakes of agent/tests)

Each row is read between two readings of the pool's own figures
(used_bytes, total_bytes, free_bytes) and, with --torch, torch's
(memory_allocated, memory_reserved, max_memory_allocated): a line
`WITNESS {"label", "before", "after"}` says both."""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch", action="store_true", help="torch allocates on the same GPU too")
    ap.add_argument("--no-agent", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="the fake cupy (and GPU) of agent/tests")
    a = ap.parse_args()
    gpu = None
    if a.dry_run:
        sys.path.insert(0, os.path.join(ROOT, "agent", "tests", "fakemodules"))
        sys.path.insert(0, os.path.join(ROOT, "agent", "tests"))
    import cupy as cp

    torch = None
    if a.torch and not a.dry_run:
        import torch
    gputop = None
    if not a.no_agent:
        import gputop  # noqa: F811
        if a.dry_run and a.torch:
            from fakegpu import FakeGPU
            gpu = FakeGPU(1)
            gpu.install()
        gputop.attach()
    pool = cp.get_default_memory_pool()
    held: list = []
    tensors: list = []

    def stats() -> dict:
        s = {"cupy": {"used_bytes": pool.used_bytes(), "total_bytes": pool.total_bytes(),
                      "free_bytes": pool.free_bytes()}}
        if torch is not None:
            s["torch"] = {"allocated": torch.cuda.memory_allocated(0), "reserved": torch.cuda.memory_reserved(0),
                          "peak": torch.cuda.max_memory_allocated(0)}
        elif gpu is not None:
            c = gpu.c[0]  # the fake allocator's own counters
            s["torch"] = {"allocated": c["allocated"], "reserved": c["reserved"], "peak": c["peak"]}
        return s

    def sync() -> None:
        if not a.dry_run:
            cp.cuda.Device(0).synchronize()
            if torch is not None:
                torch.cuda.synchronize()

    def row(label: str, end: bool = False) -> None:
        sync()
        before = stats()
        if gputop is not None:
            gputop.snapshot(label, end=end)
        print("WITNESS " + json.dumps({"label": label, "before": before, "after": stats()}), flush=True)

    def alloc(n: int) -> None:
        if a.dry_run:
            cp.fake.alloc(n)
            held.append(n)
        else:
            held.append(cp.ones((n // 4,), dtype=cp.float32))

    def free_all() -> None:
        while held:
            x = held.pop()
            if a.dry_run:
                cp.fake.free(x)
        # the arrays are gone: their blocks are free in the pool

    def talloc(n: int) -> None:
        if torch is not None:
            tensors.append(torch.empty(n // 4, dtype=torch.float32, device="cuda"))
        elif gpu is not None:
            gpu.alloc(0, n)
            tensors.append(n)

    first = cp.ones((1,), dtype=cp.float32) if not a.dry_run else cp.fake.alloc(512)  # CuPy's first device use
    del first
    talloc(64 * MiB)
    row("start")
    for n in (100 * MiB, 300 * MiB + 4096, 1000 * MiB + 123):
        alloc(n)
        talloc(n // 2)
        row(f"after {n} bytes")
    free_all()
    row("arrays freed")  # the pool keeps their blocks: total_bytes stays
    pool.free_all_blocks()
    if torch is not None:
        tensors.clear()
        torch.cuda.empty_cache()
    elif gpu is not None:
        for n in tensors:
            gpu.free(0, n)
        tensors.clear()
    row("After cleanup", end=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
