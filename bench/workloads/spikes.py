#!/usr/bin/env python3
"""Short memory spikes: the thing a slow sampler misses.

Allocate --size-gib (4) GiB, hold it --hold-ms (5) ms, free it and empty the
cache, --count (20) times with --gap-ms (300) ms between. Each spike's times
(time.time_ns, the clock gputop's recording uses) go to --out, so a checker
can look for each one in a recording.

    python3 bench/workloads/spikes.py --out spikes.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Allocate-hold-free memory spikes on a CUDA device.")
    ap.add_argument("--out", help="JSON file for each spike's times")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--size-gib", type=float, default=4.0)
    ap.add_argument("--hold-ms", type=float, default=5.0)
    ap.add_argument("--gap-ms", type=float, default=300.0)
    ap.add_argument("--lead-in", type=float, default=1.0,
                    help="seconds of quiet before the first spike (a baseline for the checker)")
    ap.add_argument("--attach", action="store_true", help="also attach gputop's agent")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    a = ap.parse_args(argv)
    if a.dry_run:
        try:
            import torch  # noqa: F401
            print("spikes.py: import torch: ok")
        except Exception as e:
            print(f"spikes.py: import torch: {type(e).__name__}: {e}")
        print(f"spikes.py: dry run ok ({a.count} x {a.size_gib:g} GiB, hold {a.hold_ms:g} ms, "
              f"gap {a.gap_ms:g} ms)")
        return 0

    import torch

    if not torch.cuda.is_available():
        print("spikes.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device(a.device)
    torch.zeros(1, device=dev)
    if a.attach:
        import gputop
        gputop.attach()
    torch.cuda.synchronize()
    time.sleep(a.lead_in)

    n = int(a.size_gib * (1 << 30))
    spikes = []
    for i in range(a.count):
        t_start = time.time_ns()
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        x.fill_(1)  # touch it, so the memory is really in use, not only reserved
        torch.cuda.synchronize()
        t_held = time.time_ns()
        time.sleep(a.hold_ms / 1000)
        t_release = time.time_ns()
        del x
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        t_end = time.time_ns()
        spikes.append({"i": i, "t_start_ns": t_start, "t_held_ns": t_held,
                       "t_release_ns": t_release, "t_end_ns": t_end,
                       "held_ms": round((t_release - t_held) / 1e6, 3),
                       "total_ms": round((t_end - t_start) / 1e6, 3)})
        time.sleep(a.gap_ms / 1000)

    out = {"pid": os.getpid(), "device": torch.cuda.get_device_name(dev), "bytes": n,
           "count": a.count, "hold_ms": a.hold_ms, "gap_ms": a.gap_ms, "spikes": spikes}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)
    tot = sorted(s["total_ms"] for s in spikes)
    print(f"spikes.py: {a.count} spikes of {a.size_gib:g} GiB, each {tot[0]:.1f}-{tot[-1]:.1f} ms "
          f"from allocation to empty_cache", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
