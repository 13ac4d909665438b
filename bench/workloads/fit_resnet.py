#!/usr/bin/env python3
"""A torchvision ResNet-50 trained on random 224x224 images, for `gputop
fit`: channels-last, bf16 autocast, SGD with momentum. It trains until
stopped (--steps 0) or for --steps steps; with --cap BYTES it caps
torch's allocator first, as gputop fit does, and says whether the batch
fit. Without torchvision it says so and exits 4.

    python3 bench/workloads/fit_resnet.py --batch-size 64                # under gputop fit
    python3 bench/workloads/fit_resnet.py --batch-size 300 --steps 6 --cap 17179869184

Its last line with --steps: RESULT {"fit": true|false, "peak": bytes, ...};
exit 0 when the batch fit, 3 when it ran out of memory.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

NO_TORCHVISION = 4


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, help="the batch (required but with --dry-run, which takes 2 by default)")
    ap.add_argument("--steps", type=int, default=0, help="0: until stopped")
    ap.add_argument("--cap", type=int, default=0, help="cap torch's allocator at BYTES first (0: none)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--dry-run", action="store_true", help="a small ResNet-18, two steps on the CPU")
    a = ap.parse_args()
    if a.batch_size is None:
        if not a.dry_run:
            ap.error("--batch-size is required")
        a.batch_size = 2
    import torch

    try:
        import torchvision
    except ImportError:
        print("fit_resnet.py: torchvision is not installed")
        if a.dry_run:
            print("fit_resnet.py: dry run ok (without torchvision)")
            return 0
        return NO_TORCHVISION
    if a.dry_run:
        dev, model, size = "cpu", torchvision.models.resnet18(num_classes=10), 32
    else:
        dev, model, size = "cuda", torchvision.models.resnet50(), a.size
        if a.cap:
            torch.cuda.init()
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, (a.cap + 0.5) / total))
    model = model.to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    classes = 10 if a.dry_run else 1000
    steps = 2 if a.dry_run else a.steps
    t0, done = time.monotonic(), 0
    try:
        for step in range(steps or sys.maxsize):
            x = torch.randn(a.batch_size, 3, size, size, device=dev).to(memory_format=torch.channels_last)
            y = torch.randint(0, classes, (a.batch_size,), device=dev)
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done = step + 1
        fit = True
    except torch.OutOfMemoryError:
        fit = False
    if dev == "cuda":
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
    print("RESULT " + json.dumps({"fit": fit, "peak": peak, "steps": done, "batch_size": a.batch_size,
                                  "seconds": round(time.monotonic() - t0, 2)}), flush=True)
    if a.dry_run:
        print("fit_resnet.py: dry run ok")
    return 0 if fit else 3


if __name__ == "__main__":
    sys.exit(main())
