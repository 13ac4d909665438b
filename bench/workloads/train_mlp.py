#!/usr/bin/env python3
"""The reference article's training run, with gputop's agent attached.

The model and trainer follow the article's ModelTrainer (Linear, BatchNorm,
ReLU, Dropout twice, then a classifier; AdamW with weight decay; gradient
clipping; loss.item() so no GPU tensor outlives a step; snapshots "Training
start", "Epoch 5", "Epoch 10", "Training end", then gputop.cleanup()'s own
"Before cleanup" and "After cleanup"), made wider
and fed from a dataset kept on the GPU so that an H200 is busy for about
--seconds and the memory it uses is visible on a chart (about 2 GiB).

Right after "Training end" (an end row: the agent walks the holders and
gputop gives it a verdict, ✗ while the model, the optimizer and the dataset
are held) it calls gputop.holders(), which sends the report to gputop (the
h pane of a recording of this run, the demo); "After cleanup" is the run's
last end row, ✓ once everything is released.

Next to every snapshot the script reads torch's own counters
(memory_allocated, memory_reserved, max_memory_allocated, exact bytes) just
before and just after the snapshot call and writes them to --out, so a
checker can compare gputop's table with them to the byte.

    PYTHONPATH=agent python3 bench/workloads/train_mlp.py --out torch.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Reference MLP training run with gputop snapshots.")
    ap.add_argument("--out", help="JSON file for torch's own numbers at each snapshot")
    ap.add_argument("--seconds", type=float, default=30.0,
                    help="target training time; epoch 1 runs for seconds/epochs and sets the "
                         "steps of every later epoch (default 30)")
    ap.add_argument("--steps-per-epoch", type=int, default=0,
                    help="fixed steps per epoch instead of timing epoch 1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--in-features", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--samples", type=int, default=262144,
                    help="dataset rows kept on the GPU (default 262144 = 1 GiB of float32)")
    ap.add_argument("--idle", type=float, default=1.0,
                    help="seconds of quiet before training and after cleanup, so a chart shows "
                         "the baseline")
    ap.add_argument("--api", choices=["tracker", "snapshot"], default="tracker",
                    help="gputop.Tracker (drop-in for the reference tracker) or gputop.snapshot")
    ap.add_argument("--no-agent", action="store_true",
                    help="do not import gputop; a local copy of the reference tracker is used")
    ap.add_argument("--socket", help="passed to gputop.attach (default: GPUTOP_SOCKET or the "
                                     "per-user socket)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dry-run", action="store_true",
                    help="check arguments and imports without touching a GPU")
    return ap.parse_args(argv)


class LocalTracker:
    """The reference GPUMemoryTracker, used with --no-agent."""

    def __init__(self, torch, device: str) -> None:
        self.torch, self.device, self.snapshots = torch, device, []

    def snapshot(self, label: str) -> dict:
        c = self.torch.cuda
        snap = {"label": label,
                "allocated_mb": c.memory_allocated() / 2**20,
                "cached_mb": c.memory_reserved() / 2**20,
                "max_allocated_mb": c.max_memory_allocated() / 2**20}
        self.snapshots.append(snap)
        print(f"[{label}] Allocated: {snap['allocated_mb']:.2f} MB, Cached: "
              f"{snap['cached_mb']:.2f} MB, Peak: {snap['max_allocated_mb']:.2f} MB", flush=True)
        return snap

    def reset_peak(self) -> None:
        self.torch.cuda.reset_peak_memory_stats()

    def print_summary(self) -> None:
        for s in self.snapshots:
            print(f"  {s['label']:30} Alloc: {s['allocated_mb']:8.2f} MB | "
                  f"Cache: {s['cached_mb']:8.2f} MB | Peak: {s['max_allocated_mb']:8.2f} MB")


def jsonable(v):
    """What the agent returned, in a form json can write (it is kept for reading only)."""
    try:
        json.dumps(v)
        return v
    except TypeError:
        if isinstance(v, dict):
            return {str(k): jsonable(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [jsonable(x) for x in v]
        return repr(v)


class Recorder:
    """Reads torch's counters around each snapshot call and keeps them for --out."""

    def __init__(self, torch, take, device) -> None:
        self.torch, self.take, self.device, self.rows = torch, take, device, []

    def counters(self) -> dict:
        c, d = self.torch.cuda, self.device
        return {"allocated": c.memory_allocated(d), "reserved": c.memory_reserved(d),
                "peak": c.max_memory_allocated(d)}

    def snapshot(self, label: str) -> None:
        before = self.counters()
        t0 = time.time_ns()
        returned = self.take(label)
        t1 = time.time_ns()
        after = self.counters()
        # Nothing allocates between the two reads, so they agree; if they did
        # not, the checker could not say which one gputop should match.
        self.add(label, before, before == after, t0, t1, returned, after)

    def add(self, label: str, values: dict, stable: bool, t0: int, t1: int, returned=None,
            after: dict | None = None) -> None:
        self.rows.append({"label": label, "t_call_ns": t0, "t_return_ns": t1, **values,
                          "stable": stable, "after": after or values,
                          "returned": jsonable(returned)})


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.dry_run:
        for mod in ("torch", "gputop"):
            try:
                __import__(mod)
                print(f"train_mlp.py: import {mod}: ok")
            except Exception as e:  # the dry run only reports
                print(f"train_mlp.py: import {mod}: {type(e).__name__}: {e}")
        try:
            import gputop as g
            print(f"train_mlp.py: gputop.holders: {'ok' if callable(getattr(g, 'holders', None)) else 'missing'}")
        except Exception as e:  # the dry run only reports
            print(f"train_mlp.py: gputop.holders: {type(e).__name__}: {e}")
        print(f"train_mlp.py: dry run ok ({a.epochs} epochs, ~{a.seconds:g} s, batch {a.batch}, "
              f"hidden {a.hidden})")
        return 0

    import gc

    import torch
    import torch.nn as nn

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("train_mlp.py: CUDA is not available", file=sys.stderr)
        return 2
    device = torch.device(a.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())

    t_start = time.time()
    torch.manual_seed(42)
    torch.zeros(1, device=device)  # CUDA context first, so the agent's hello names the device
    gputop = None
    if not a.no_agent:
        import gputop  # noqa: F811  (the agent, from PYTHONPATH=agent or pip install ./agent)
        if a.socket:
            gputop.attach(socket=a.socket)
        else:
            gputop.attach()

    # Synthetic but learnable data: labels come from a hidden linear map, so
    # the loss falls the way a real run's does. Kept on the GPU (as many real
    # runs do) so the GPU, not a DataLoader, sets the pace.
    X = torch.randn(a.samples, a.in_features, device=device)
    w_true = torch.randn(a.in_features, 10, device=device)
    Y = (X @ w_true).argmax(1)
    del w_true
    warm_up(torch, nn, a, device)
    torch.cuda.synchronize()

    if gputop is None:
        tracker = LocalTracker(torch, a.device)
    else:
        try:
            tracker = gputop.Tracker(device=a.device)
        except TypeError:
            tracker = gputop.Tracker()
    take = tracker.snapshot if (gputop is None or a.api == "tracker") else gputop.snapshot
    rec = Recorder(torch, take, device)

    model = nn.Sequential(
        nn.Linear(a.in_features, a.hidden), nn.BatchNorm1d(a.hidden), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(a.hidden, a.hidden), nn.BatchNorm1d(a.hidden), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(a.hidden, 10),
    )
    trainer = ModelTrainer(model, device, rec, tracker, a)
    time.sleep(a.idle)
    trainer.train(X, Y)
    # who holds the memory at the end of training (model, optimizer, the
    # dataset), sent to gputop as a holders report; outside any snapshot
    # call, and it allocates nothing on the GPU
    holders_out = None
    if gputop is not None:
        rep = gputop.holders()
        holders_out = {"total": rep.total, "took_ms": round(rep.took_ms, 2),
                       "groups": [[g.kind, g.name, g.bytes] for g in rep.groups]}
        print(f"train_mlp.py: holders after training: {rep.total / 2**20:.1f} MiB in "
              f"{len(rep.groups)} group(s), {rep.took_ms:.0f} ms", flush=True)
    # the dataset goes too: a cleanup with it still on the GPU would be
    # (rightly) judged a leak of 1 GiB held by X in main()
    del X, Y
    trainer.cleanup(gputop, gc)
    time.sleep(a.idle)

    out = {
        "pid": os.getpid(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device),
        "device_index": device.index,
        "agent": gputop is not None,
        "api": a.api if gputop is not None else "local",
        "epochs": a.epochs,
        "steps_per_epoch": trainer.steps_per_epoch,
        "batch": a.batch,
        "train_seconds": round(trainer.train_seconds, 2),
        "wall_seconds": round(time.time() - t_start, 2),
        "losses": trainer.losses,
        "cleanup_returned": jsonable(trainer.cleanup_returned),
        "holders": holders_out,
        "snapshots": rec.rows,
    }
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(out, fh, indent=1)
        os.replace(tmp, a.out)
    print(f"train_mlp.py: done in {out['wall_seconds']} s ({trainer.steps_per_epoch} steps/epoch)",
          flush=True)
    return 0


def warm_up(torch, nn, a: argparse.Namespace, device) -> None:
    """One step of a small copy of the model, then free it.

    cuBLAS keeps a workspace per thread through torch's allocator, and the
    backward pass runs on autograd's own thread: without this step the first
    backward would add a workspace that outlives training and After cleanup
    would sit above the baseline by that much, for reasons unrelated to leaks.
    """
    m = nn.Sequential(nn.Linear(a.in_features, 64), nn.BatchNorm1d(64), nn.ReLU(),
                      nn.Dropout(0.3), nn.Linear(64, 10)).to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(64, a.in_features, device=device)
    y = torch.randint(0, 10, (64,), device=device)
    loss = nn.CrossEntropyLoss()(m(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 5.0)
    opt.step()
    loss.item()
    del m, opt, x, y, loss
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


class ModelTrainer:
    """The reference ModelTrainer: train, then clean up, taking snapshots."""

    def __init__(self, model, device, rec: Recorder, tracker, a: argparse.Namespace) -> None:
        import torch.nn as nn

        self.model, self.device, self.rec, self.tracker, self.a = model, device, rec, tracker, a
        self.optimizer = None
        self.criterion = nn.CrossEntropyLoss()
        self.steps_per_epoch = a.steps_per_epoch
        self.losses: list[float] = []
        self.train_seconds = 0.0
        self.cleanup_returned = None

    def train(self, X, Y) -> None:
        import torch

        a = self.a
        # Training start is taken before the model reaches the GPU, so its
        # allocated value is the baseline that After cleanup must return to
        # (the dataset stays; everything the training made is gone).
        self.tracker.reset_peak()
        self.rec.snapshot("Training start")
        self.model = self.model.to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01)
        t0 = time.perf_counter()
        n = X.shape[0]
        for epoch in range(a.epochs):
            self.model.train()
            perm = torch.randperm(n, device=self.device)
            epoch_loss, steps, i = 0.0, 0, 0
            t_epoch = time.perf_counter()
            budget = a.seconds / a.epochs
            while True:
                if self.steps_per_epoch and steps >= self.steps_per_epoch:
                    break
                if not self.steps_per_epoch and steps > 0 and time.perf_counter() - t_epoch >= budget:
                    break
                if i + a.batch > n:  # a new pass over the data within the epoch
                    perm, i = torch.randperm(n, device=self.device), 0
                idx = perm[i:i + a.batch]
                i += a.batch
                inputs, targets = X[idx], Y[idx]
                self.optimizer.zero_grad()
                outputs = self.model(inputs)
                loss = self.criterion(outputs, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                self.optimizer.step()
                epoch_loss += loss.item()  # a Python float: no GPU tensor is kept
                steps += 1
                del outputs, loss, inputs, targets, idx
            if not self.steps_per_epoch:
                self.steps_per_epoch = steps
            del perm
            avg = epoch_loss / max(steps, 1)
            self.losses.append(round(avg, 4))
            print(f"epoch {epoch + 1}/{a.epochs}: loss {avg:.4f} ({steps} steps, "
                  f"{time.perf_counter() - t_epoch:.1f} s)", flush=True)
            if (epoch + 1) % 5 == 0:
                self.rec.snapshot(f"Epoch {epoch + 1}")
        self.train_seconds = time.perf_counter() - t0
        self.rec.snapshot("Training end")

    def cleanup(self, gputop, gc) -> None:
        import torch

        del self.optimizer
        del self.criterion
        self.model = self.model.cpu()
        del self.model
        if gputop is not None:
            # gputop.cleanup() is the reference full_cleanup with its own
            # "Before cleanup" and "After cleanup" snapshots, taken first and
            # last inside the call: torch's counters read just before and
            # just after the call are theirs (nothing allocates in between).
            before = self.rec.counters()
            t0 = time.time_ns()
            if self.a.api == "tracker":
                ret = gputop.cleanup(tracker=self.tracker)
            else:
                ret = gputop.cleanup()
            t1 = time.time_ns()
            after = self.rec.counters()
            self.cleanup_returned = ret
            dev = self.device.index
            agent_before = ((ret or {}).get("before") or {}).get(dev, {})
            agent_after = ((ret or {}).get("after") or {}).get(dev, {})
            self.rec.add("Before cleanup", before,
                         all(agent_before.get(k) == v for k, v in before.items()), t0, t0,
                         agent_before)
            self.rec.add("After cleanup", after,
                         all(agent_after.get(k) == v for k, v in after.items()), t1, t1,
                         agent_after)
        else:  # the reference full_cleanup, then its tracker's snapshot
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.ipc_collect()
            self.rec.snapshot("After cleanup")
        self.tracker.print_summary()


if __name__ == "__main__":
    sys.exit(main())
