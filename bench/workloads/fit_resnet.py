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

import sys

import fitloop

NO_TORCHVISION = 4


def main() -> int:
    a = fitloop.parse(__doc__, "a small ResNet-18, two steps on the CPU",
                      lambda ap: ap.add_argument("--size", type=int, default=224))
    import torch

    try:
        import torchvision
    except ImportError:
        print("fit_resnet.py: torchvision is not installed")
        if a.dry_run:
            print("fit_resnet.py: dry run ok (without torchvision)")
            return 0
        return NO_TORCHVISION
    dev = fitloop.device(torch, a)
    if a.dry_run:
        model, size, classes = torchvision.models.resnet18(num_classes=10), 32, 10
    else:
        model, size, classes = torchvision.models.resnet50(), a.size, 1000
    model = model.to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        x = torch.randn(a.batch_size, 3, size, size, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, classes, (a.batch_size,), device=dev)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return fitloop.train(torch, a, dev, step, "fit_resnet.py")

if __name__ == "__main__":
    sys.exit(main())
