#!/usr/bin/env python3
"""Where the agent's time goes, call by call, on a CUDA device.

    PYTHONPATH=agent python3 bench/agent_micro.py [--out micro.json]

Times (median and p99 over --n calls, µs): torch's allocator stats calls,
gputop's own reading of them, the agent thread's per-tick sampling, and
gputop.snapshot() with no gputop listening. Also lists the allocator entry
points this torch build offers, for looking for a cheaper one. No gputop
needs to run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import call_times_ns, quantile  # noqa: E402


def timed(fn, n: int, gap: float = 0.0) -> dict:
    """Back to back after 50 untimed calls, or with gap seconds of sleep
    before each call (a cold call, as a snapshot once an epoch is)."""
    ns = call_times_ns(fn, n, warmup=min(n, 50), gap=gap)
    return {"median_us": round(quantile(ns, 0.5) / 1e3, 2), "p99_us": round(quantile(ns, 0.99) / 1e3, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    import torch

    import gputop
    from gputop import _agent, _backend, _torch

    if a.dry_run:
        print("agent_micro.py: dry run ok")
        return 0
    if not torch.cuda.is_available():
        print("agent_micro.py: CUDA is not available", file=sys.stderr)
        return 2
    os.environ["GPUTOP_SOCKET"] = "/nonexistent/gputop.sock"  # nobody listens
    x = torch.ones(1 << 20, device="cuda")  # CUDA initialised, something allocated
    src = _backend.get()
    raw = torch._C._cuda_memoryStats(0)
    res = {
        "torch": torch.__version__,
        "_cuda_memoryStats(0)": timed(lambda: torch._C._cuda_memoryStats(0), a.n),
        "memory_allocated()": timed(torch.cuda.memory_allocated, a.n),
        "counters(stats)": timed(lambda: _torch.counters(raw), a.n),
        "source.read(0)": timed(lambda: src.read(0), a.n),
        "source.devices()": timed(src.devices, a.n),
    }
    ag = _agent.Agent()
    ag._devs = [0]
    res["agent tick (_sample)"] = timed(ag._sample, a.n)
    res["snapshot(), no gputop"] = timed(lambda: gputop.snapshot("micro"), a.n)
    cold = min(a.n, 300)
    res["cold: _cuda_memoryStats(0)"] = timed(lambda: torch._C._cuda_memoryStats(0), cold, 0.005)
    res["cold: source.read(0)"] = timed(lambda: src.read(0), cold, 0.005)
    res["cold: source.devices()"] = timed(src.devices, cold, 0.005)
    res["cold: snapshot(), no gputop"] = timed(lambda: gputop.snapshot("micro"), cold, 0.005)
    gputop.detach()
    for name in ("torch.accelerator.memory_allocated", "torch.cuda.memory.memory_stats_as_nested_dict"):
        obj = torch
        try:
            for part in name.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            continue
        res[name + "()"] = timed(obj, min(a.n, 500))
    res["torch._C entry points"] = sorted(k for k in dir(torch._C)
                                          if "emory" in k or "Stats" in k or "Allocator" in k)
    del x
    width = max(len(k) for k in res)
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"{k:{width}}  median {v['median_us']:8.2f} us  p99 {v['p99_us']:8.2f} us")
    print("entry points:", ", ".join(res["torch._C entry points"]))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
