#!/usr/bin/env python3
"""What one gputop.holders() walk costs, in a process shaped like a notebook
after some training.

    PYTHONPATH=agent python3 bench/holders_bench.py                 # CUDA
    PYTHONPATH=agent python3 bench/holders_bench.py --device cpu    # same walk, CPU tensors

The process holds --objects live Python objects of its own (small dicts,
lists and instances in user variables, as notebooks accumulate), on top of
what importing torch brings, and --tensors tensors on the device spread over
every kind of holder: a model's parameters and their .grad, Adam's state, a
list of loss tensors whose autograd graphs are kept, an output kept with its
graph, IPython-style output history, a stored traceback, a cache inside an
object, and tensors only an unnamed container reaches. Then it times
--repeat walks (after one warm-up) and prints min / median / max and the
target (100,000 objects and 1,000 CUDA tensors in at most 200 ms).

--json FILE writes the numbers; --check exits 1 when the median misses the
target.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "agent"))

TARGET_MS = 200.0


class Record:
    """A user object: an attribute cache and some plain fields."""

    def __init__(self, i: int) -> None:
        self.i = i
        self.name = f"r{i}"
        self.tags = [i, i + 1]


class Trainer:
    def __init__(self, model, opt) -> None:
        self.model = model
        self.opt = opt
        self.cache = {}


def device_tensors(torch, device: str) -> int:
    dev = torch.device(device)
    n = 0
    for o in gc.get_objects():
        if isinstance(o, torch.Tensor) and o.device.type == dev.type:
            n += 1
    return n


def build(torch, device: str, n_objects: int, n_tensors: int) -> dict:
    """Fill __main__'s namespace as a notebook would be after training."""
    nn = torch.nn
    ns = sys.modules["__main__"].__dict__
    dev = torch.device(device)

    # a 24-layer MLP: 48 parameters, their .grad, Adam's moments
    layers = []
    for _ in range(24):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.Adam(model.parameters())
    crit = nn.MSELoss()
    losses = []
    for _ in range(8):  # loss tensors kept with their autograd graphs
        x = torch.randn(64, 256, device=dev)
        losses.append(crit(model(x), torch.zeros(64, 256, device=dev)))
    losses[-1].backward()
    opt.step()
    out = model(torch.randn(32, 256, device=dev))  # inference without no_grad
    trainer = Trainer(model, opt)
    # output history as IPython keeps it
    Out = {i: torch.randn(16, 16, device=dev) for i in range(1, 21)}

    def failing() -> None:  # a stored exception whose frame holds a batch
        batch = [torch.randn(8, 8, device=dev) for _ in range(10)]  # noqa: F841
        raise RuntimeError("bench")

    try:
        failing()
    except RuntimeError:
        sys.last_type, sys.last_value, sys.last_traceback = sys.exc_info()
    hidden = [[torch.ones(4, device=dev) for _ in range(20)]]  # three hops from a name
    anchor = Record(-1)
    anchor.tags = {"deep": hidden}
    ns.update(model=model, opt=opt, crit=crit, losses=losses, out=out, trainer=trainer,
              Out=Out, anchor=anchor)
    del x, hidden
    # top up to n_tensors Python tensor objects on the device: batches in a
    # list and entries of an object's cache
    rest = max(0, n_tensors - device_tensors(torch, device))
    ns["batches"] = [torch.randn(32, 32, device=dev) for _ in range(rest // 2)]
    for i in range(rest - rest // 2):
        trainer.cache[f"k{i}"] = torch.randn(8, device=dev)
    # plain Python objects: the bulk of what gc.get_objects() returns
    third = n_objects // 3
    ns["records"] = [Record(i) for i in range(third)]  # an instance and its list each
    ns["table"] = [{"i": i, "v": [i]} for i in range(third // 2)]  # a dict and a list each
    return {"objects": 2 * third + 2 * (third // 2), "tensors": device_tensors(torch, device)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--tensors", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--check", action="store_true", help="exit 1 when the median misses the target")
    a = ap.parse_args()

    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("holders_bench: no CUDA device here; use --device cpu", file=sys.stderr)
        return 2
    from gputop import _holders

    made = build(torch, a.device, a.objects, a.tensors)
    gc.collect()
    n_gc = len(gc.get_objects())
    first = _holders.holders(a.device)
    runs = []
    for _ in range(a.repeat):
        r = _holders.holders(a.device)
        assert r.error is None, r.error
        runs.append(r.took_ms)
    med = statistics.median(runs)
    res = {
        "device": a.device,
        "gpu": torch.cuda.get_device_name() if a.device.startswith("cuda") else None,
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gc_objects": n_gc,
        "objects_made": made["objects"],
        "device_tensors": made["tensors"],
        "storages_found": sum(g.tensors for g in first.groups),
        "groups": len(first.groups),
        "skipped": first.skipped,
        "first_ms": round(first.took_ms, 2),
        "min_ms": round(min(runs), 2),
        "median_ms": round(med, 2),
        "max_ms": round(max(runs), 2),
        "target_ms": TARGET_MS,
        "ok": med <= TARGET_MS,
    }
    print(first.table(top=12))
    print()
    print(f"holders(): {n_gc} gc-tracked objects ({made['objects']} made here), "
          f"{made['tensors']} tensor objects on {a.device} ({res['storages_found']} storages in "
          f"{res['groups']} groups)")
    print(f"  first {res['first_ms']} ms; then over {a.repeat}: min {res['min_ms']} ms, "
          f"median {res['median_ms']} ms, max {res['max_ms']} ms; target {TARGET_MS:g} ms: "
          f"{'met' if res['ok'] else 'MISSED'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 1 if a.check and not res["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
