#!/usr/bin/env python3
"""A short Hugging Face Trainer or Lightning run with gputop's agent, ended
the way a user ends one: the trainer and the model deleted, then the
"After cleanup" row (no gputop.cleanup(): what the framework leaves is what
the verdict must judge).

    PYTHONPATH=agent python3 bench/workloads/frameworks.py hf|lightning [--out FILE]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("framework", choices=["hf", "lightning"])
    ap.add_argument("--out")
    a = ap.parse_args()

    import torch

    import gputop

    gputop.attach()
    torch.zeros(1, device="cuda")
    gputop.snapshot("Training start")
    ds = torch.utils.data.TensorDataset(torch.randn(2048, 100), torch.randint(0, 10, (2048,)))
    if a.framework == "lightning":
        import lightning as L

        class Net(L.LightningModule):
            def __init__(self) -> None:
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(100, 256), torch.nn.ReLU(),
                                               torch.nn.Linear(256, 10))

            def training_step(self, b, i):
                x, y = b
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters())

        model = Net()
        trainer = L.Trainer(max_epochs=2, accelerator="gpu", devices=1, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False)
        trainer.fit(model, torch.utils.data.DataLoader(ds, batch_size=64))
    else:
        from transformers import Trainer, TrainingArguments

        class Net(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.l1, self.l2 = torch.nn.Linear(100, 256), torch.nn.Linear(256, 10)

            def forward(self, x, labels=None):
                out = self.l2(torch.relu(self.l1(x)))
                return {"loss": torch.nn.functional.cross_entropy(out, labels), "logits": out}

        class Rows(torch.utils.data.Dataset):
            def __len__(self) -> int:
                return len(ds)

            def __getitem__(self, i):
                x, y = ds[i]
                return {"x": x, "labels": y}

        model = Net()
        with tempfile.TemporaryDirectory() as d:
            args = TrainingArguments(output_dir=d, num_train_epochs=2, per_device_train_batch_size=64,
                                     report_to=[], save_strategy="no", logging_strategy="no",
                                     disable_tqdm=True)
            trainer = Trainer(model=model, args=args, train_dataset=Rows())
            trainer.train()
    gputop.snapshot("Training end")
    del trainer, model
    gc.collect()
    torch.cuda.empty_cache()
    after = gputop.snapshot("After cleanup")[0]
    time.sleep(0.5)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"pid": os.getpid(), "framework": a.framework, "after": after,
                       "allocated": torch.cuda.memory_allocated()}, f, indent=1)
    print(f"{a.framework}: After cleanup allocated {after['allocated']} B, held {after.get('held')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
