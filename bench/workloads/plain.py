#!/usr/bin/env python3
"""A plain PyTorch training run with no line of gputop in it, for `gputop
run`: a small MLP trained for a few steps, then an allocation larger than
the GPU, caught (a real CUDA OOM), then the end. It writes torch's own
counters (memory_allocated, memory_reserved, max_memory_allocated, exact
bytes) right after the OOM and at interpreter exit, from an exit handler
registered after torch's import, so it runs just before gputop's
"Process end" row is taken: the checker compares the two.

    python3 bench/workloads/plain.py --out torch.json
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON file for torch's own counters")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports without a GPU")
    a = ap.parse_args()
    import torch

    if a.dry_run:
        print("plain.py: dry run ok")
        return 0
    got: dict = {"pid": os.getpid()}

    def counters() -> dict:
        c = torch.cuda
        return {"allocated": c.memory_allocated(), "reserved": c.memory_reserved(),
                "peak": c.max_memory_allocated()}

    def at_exit() -> None:
        got["exit"] = counters()
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(got, fh, indent=1)

    atexit.register(at_exit)  # before gputop's Process end (exit handlers run last first)
    got["before_cuda"] = counters()  # reading these does not initialise CUDA
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(a.steps):
        x = torch.randn(512, 1024, device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (512,), device="cuda"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        got["after_oom"] = counters()
        got["oom_requested_at_least"] = 2 * total
    print(f"plain.py: {a.steps} steps, loss {loss.item():.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
