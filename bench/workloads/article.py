#!/usr/bin/env python3
"""The reference article's complete training program, with its tracker swapped
for gputop.Tracker: the first thing a new user runs.

The program is the article's as written: a 100-feature MLP with BatchNorm
and Dropout trained for 10 epochs on 1600 random rows through a DataLoader,
AdamW with weight decay, gradient clipping, loss.item(), snapshots
"Training start", "Epoch 5", "Epoch 10", "Training end", "Eval start",
"Eval end", the model saved from the CPU, then its own cleanup (del the
optimizer, the criterion and the model, the article's full_cleanup: gc,
synchronize, empty_cache, reset_peak_memory_stats, ipc_collect) and the
"After cleanup" snapshot, and the summary table.

--cleanup gputop replaces the article's full_cleanup with gputop.cleanup().
--keep MIB keeps a tensor of that size alive in a global named `kept` past
the cleanup (a real leak the verdict must name).

After the run the script writes --out: torch's own counters at each
snapshot (read around the tracker's call, to the byte), the bytes of the
trainer's parameters and buffers, their gradients and its optimizer's state
on the GPU at each (numel x element size, each storage once: what the row's
ledger must say), the state after the cleanup, and what the verdict was
told. --nvml also reads NVML's figure for the process after each snapshot
(nvidia-smi; where it gives none, the device's used memory).

    PYTHONPATH=agent python3 bench/workloads/article.py --out article.json
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="The reference article's ModelTrainer program.")
    ap.add_argument("--out", help="JSON file for torch's own numbers")
    ap.add_argument("--cleanup", choices=["article", "gputop"], default="article",
                    help="the article's full_cleanup (default) or gputop.cleanup()")
    ap.add_argument("--keep", type=float, default=0.0,
                    help="MiB of a tensor kept alive in the global `kept` past the cleanup")
    ap.add_argument("--socket", help="passed to gputop.attach (default: GPUTOP_SOCKET)")
    ap.add_argument("--nvml", action="store_true",
                    help="read NVML's figure for this process after each snapshot (nvidia-smi)")
    ap.add_argument("--idle", type=float, default=0.5,
                    help="seconds of quiet after the cleanup, so the recorder sees it")
    ap.add_argument("--dry-run", action="store_true", help="check imports without a GPU")
    return ap.parse_args(argv)


kept = None  # --keep: the leak, where the holders walk finds it by name


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.dry_run:
        import torch  # noqa: F401

        import gputop  # noqa: F401
        print("article.py: dry run ok")
        return 0

    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    import gputop

    if not torch.cuda.is_available():
        print("article.py: CUDA is not available", file=sys.stderr)
        return 2
    if a.socket:
        gputop.attach(socket=a.socket)
    else:
        gputop.attach()

    rows: list[dict] = []

    def counters() -> dict:
        c = torch.cuda
        return {"allocated": c.memory_allocated(), "reserved": c.memory_reserved(),
                "peak": c.max_memory_allocated()}

    current: dict = {}  # the trainer, once there is one

    def once(tensors) -> int:
        """numel x element size of the GPU tensors, each storage once."""
        seen: dict = {}
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.is_cuda:
                seen[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()
        return sum(seen.values())

    def parts() -> dict:
        """The trainer's parameters and buffers, their gradients and its
        optimizer's state, on the GPU, each storage once."""
        tr = current.get("trainer")
        model = getattr(tr, "model", None)
        opt = getattr(tr, "optimizer", None)
        params = list(model.parameters()) + list(model.buffers()) if model is not None else []
        mine = {p.untyped_storage().data_ptr() for p in params if p.is_cuda}
        state = [v for st in (opt.state.values() if opt is not None else ()) for v in st.values()
                 if isinstance(v, torch.Tensor) and v.is_cuda and v.untyped_storage().data_ptr() not in mine]
        return {"params": once(params), "grads": once(p.grad for p in params if p.grad is not None),
                "optimizer": once(state)}

    def nvml() -> int | None:
        """NVML's figure for this process, bytes (nvidia-smi: MiB)."""
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                 timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        got = {}
        for line in out.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) == 2 and f[0].isdigit() and f[1].isdigit():
                got[int(f[0])] = int(f[1]) * 2**20
        if os.getpid() in got:
            return got[os.getpid()]
        if len(got) == 1:  # another pid namespace: the only process on the GPU is this one
            return next(iter(got.values()))
        free, total = torch.cuda.mem_get_info()  # no figure per process: the device's used memory
        return total - free

    class Tracker(gputop.Tracker):
        """gputop.Tracker, with torch's own counters read before each row it
        takes (its snapshots and its cleanup's two)."""

        def _record(self, label, *args, **kw):  # type: ignore[override]
            before = counters()
            expect = parts()
            t0 = time.time_ns()
            got = super()._record(label, *args, **kw)
            rows.append({"label": label, "t_call_ns": t0, **before, "after": counters(), "expect": expect,
                         "nvml": nvml() if a.nvml else None})
            return got

    def full_cleanup() -> None:
        # the article's own cleanup, step for step
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            if hasattr(torch.cuda, "ipc_collect"):
                torch.cuda.ipc_collect()
            allocated = torch.cuda.memory_allocated() / 1024**2
            cached = torch.cuda.memory_reserved() / 1024**2
            print(f"Cleanup complete - Allocated: {allocated:.2f} MB, Cached: {cached:.2f} MB")

    class ModelTrainer:
        def __init__(self, model, device="cuda"):
            self.model = model
            self.device = device
            self.optimizer = None
            self.criterion = nn.CrossEntropyLoss()
            self.tracker = Tracker(device)

        def train(self, train_loader, num_epochs=10, lr=0.001):
            self.model = self.model.to(self.device)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
            self.tracker.reset_peak()
            self.tracker.snapshot("Training start")
            for epoch in range(num_epochs):
                self.model.train()
                epoch_loss = 0.0
                num_batches = 0
                for inputs, targets in train_loader:
                    inputs = inputs.to(self.device)
                    targets = targets.to(self.device)
                    self.optimizer.zero_grad()
                    outputs = self.model(inputs)
                    loss = self.criterion(outputs, targets)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                    self.optimizer.step()
                    epoch_loss += loss.item()
                    num_batches += 1
                    del outputs, loss
                avg_loss = epoch_loss / num_batches
                if (epoch + 1) % 5 == 0:
                    self.tracker.snapshot(f"Epoch {epoch + 1}")
                    print(f"  Loss: {avg_loss:.4f}")
            self.tracker.snapshot("Training end")

        def evaluate(self, test_loader):
            self.model.eval()
            correct = 0
            total = 0
            self.tracker.snapshot("Eval start")
            with torch.no_grad():
                for inputs, targets in test_loader:
                    inputs = inputs.to(self.device)
                    targets = targets.to(self.device)
                    outputs = self.model(inputs)
                    _, predicted = outputs.max(1)
                    total += targets.size(0)
                    correct += (predicted == targets).sum().item()
                    del outputs, predicted
            accuracy = correct / total
            self.tracker.snapshot("Eval end")
            print(f"Test Accuracy: {accuracy:.4f}")
            return accuracy

        def save_model(self, filepath):
            self.model = self.model.cpu()
            torch.save(self.model.state_dict(), filepath)
            print(f"Model saved to {filepath}")
            self.model = self.model.to(self.device)

        def cleanup(self):
            del self.optimizer
            del self.criterion
            self.model = self.model.cpu()
            del self.model
            if a.cleanup == "gputop":
                # gputop's cleanup takes its own Before / After cleanup rows
                self.tracker.cleanup()
            else:
                full_cleanup()
                self.tracker.snapshot("After cleanup")
            self.tracker.print_summary()

    print(f"Using GPU: {torch.cuda.get_device_name(0)}")
    device = "cuda"
    torch.manual_seed(42)
    num_samples = 2000
    X = torch.randn(num_samples, 100)
    y = torch.randint(0, 10, (num_samples,))
    split = int(0.8 * num_samples)
    train_loader = DataLoader(TensorDataset(X[:split], y[:split]), batch_size=64, shuffle=True)
    test_loader = DataLoader(TensorDataset(X[split:], y[split:]), batch_size=64, shuffle=False)
    model = nn.Sequential(
        nn.Linear(100, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 10),
    )
    trainer = ModelTrainer(model, device=device)
    current["trainer"] = trainer
    trainer.train(train_loader, num_epochs=10, lr=0.001)
    global kept
    if a.keep > 0:
        kept = torch.empty(int(a.keep * 2**20) // 4, dtype=torch.float32, device=device)
    trainer.evaluate(test_loader)
    with tempfile.TemporaryDirectory() as d:
        trainer.save_model(os.path.join(d, "model.pth"))
    trainer.cleanup()
    final = counters()
    time.sleep(a.idle)
    status = gputop.status()
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"pid": os.getpid(), "torch": torch.__version__, "cleanup": a.cleanup,
                       "keep_mib": a.keep, "rows": rows, "final": final,
                       "agent": {k: status.get(k) for k in ("connected", "marks_sent", "last_error")}},
                      f, indent=1)
    print("\nDone!")
    return 0


if __name__ == "__main__":
    sys.exit(main())
