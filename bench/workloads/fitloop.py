"""What fit_gpt.py and fit_resnet.py share: their command line (--batch-size,
--steps, --cap, --dry-run and a model's own options), the cap on torch's
allocator set as gputop fit sets it, and the training loop that says
whether the batch fit (its RESULT line and exit code). Imported by those
two workloads alone, never run."""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any, Callable

OOM_EXIT = 3  # the batch did not fit


def parse(doc: str, dry_help: str, add: Callable[[argparse.ArgumentParser], Any]) -> argparse.Namespace:
    """The workload's arguments: the shared ones, and those add() adds; a
    dry run takes a batch of 2 unless given one."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, help="the batch (required but with --dry-run, which takes 2 by default)")
    ap.add_argument("--steps", type=int, default=0, help="0: until stopped")
    ap.add_argument("--cap", type=int, default=0, help="cap torch's allocator at BYTES first (0: none)")
    add(ap)
    ap.add_argument("--dry-run", action="store_true", help=dry_help)
    a = ap.parse_args()
    if a.batch_size is None:
        if not a.dry_run:
            ap.error("--batch-size is required")
        a.batch_size = 2
    return a


def device(torch: Any, a: argparse.Namespace) -> str:
    """"cpu" for a dry run; else "cuda", its allocator capped at --cap bytes
    first when asked (the fraction rounded up, as gputop fit does)."""
    if a.dry_run:
        return "cpu"
    if a.cap:
        torch.cuda.init()
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, (a.cap + 0.5) / total))
    return "cuda"


def train(torch: Any, a: argparse.Namespace, dev: str, step: Callable[[], Any], name: str,
          loss: bool = False) -> int:
    """step() --steps times (two in a dry run; 0: until stopped) until an
    OOM; the RESULT line ({"fit", "peak", "steps", "batch_size", "seconds"},
    with loss: the last step's loss); 0 when the batch fit, OOM_EXIT when
    it did not."""
    steps = 2 if a.dry_run else a.steps
    t0, done, last = time.monotonic(), 0, None
    try:
        for i in range(steps or sys.maxsize):
            last = step()
            done = i + 1
        fit = True
    except torch.OutOfMemoryError:
        fit = False
    if dev == "cuda":
        torch.cuda.synchronize()
    out: dict[str, Any] = {"fit": fit, "peak": torch.cuda.max_memory_allocated() if dev == "cuda" else 0,
                           "steps": done, "batch_size": a.batch_size, "seconds": round(time.monotonic() - t0, 2)}
    if loss:
        v = last.item() if fit and last is not None else math.nan
        out["loss"] = None if math.isnan(v) else round(v, 3)
    print("RESULT " + json.dumps(out), flush=True)
    if a.dry_run:
        print(f"{name}: dry run ok")
    return 0 if fit else OOM_EXIT
