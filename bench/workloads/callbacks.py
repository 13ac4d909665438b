#!/usr/bin/env python3
"""A short Lightning fit or Hugging Face Trainer run with gputop's
callback (`gputop.integrations`), and a witness callback right after it
that reads torch's own counters (memory_allocated, memory_reserved,
max_memory_allocated) at the same hooks, so a checker can hold every row
the callback made to torch's values. The HF model is built from a config:
nothing is downloaded.

    PYTHONPATH=agent python3 bench/workloads/callbacks.py lightning|hf --out torch.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("framework", choices=["lightning", "hf"], nargs="?")
    ap.add_argument("--out", help="JSON file: torch's counters at each row's label")
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports without a GPU")
    a = ap.parse_args()
    if a.framework is None:
        if not a.dry_run:
            ap.error("want a framework: lightning or hf")
        import gputop.integrations.lightning as gl
        import gputop.integrations.transformers as gt

        print("callbacks.py: dry run ok", gl.GputopCallback.__mro__[1].__module__,
              gt.GputopCallback.__mro__[1].__name__)
        return 0
    import torch

    seen: list[dict] = []

    def witness(label: str) -> None:
        c = torch.cuda
        seen.append({"label": label, "allocated": c.memory_allocated(), "reserved": c.memory_reserved(),
                     "peak": c.max_memory_allocated()})

    if a.framework == "lightning":
        import lightning as L
        from gputop.integrations.lightning import GputopCallback

        if a.dry_run:
            print("callbacks.py lightning: dry run ok", GputopCallback.__mro__[1].__module__)
            return 0

        class Witness(L.Callback):
            # the same hooks, called right after GputopCallback's (list order)
            def on_train_start(self, t, m): witness("Training start")
            def on_train_epoch_end(self, t, m): witness(f"Epoch {t.current_epoch + 1}")
            def on_validation_start(self, t, m): witness(("Sanity check" if t.sanity_checking else "Validation") + " (start)")
            def on_validation_end(self, t, m): witness(("Sanity check" if t.sanity_checking else "Validation") + " (end)")
            def on_train_end(self, t, m): witness("Training end")
            def teardown(self, t, m, stage): witness("After teardown")

        class Net(L.LightningModule):
            def __init__(self) -> None:
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))

            def training_step(self, b, i):
                x, y = b
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def validation_step(self, b, i):
                x, y = b
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters())

        ds = torch.utils.data.TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
        dl = torch.utils.data.DataLoader(ds, batch_size=128)
        trainer = L.Trainer(max_epochs=3, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=4,
                            callbacks=[GputopCallback(), Witness()])
        trainer.fit(Net(), dl, dl)
    else:
        from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments
        from gputop.integrations.transformers import GputopCallback

        if a.dry_run:
            print("callbacks.py hf: dry run ok", GputopCallback.__mro__[1].__name__)
            return 0

        class Witness(TrainerCallback):
            def on_train_begin(self, *x, **k): witness("Training start")
            def on_epoch_end(self, args, state, control, **k): witness(f"Epoch {int(round(state.epoch))}")
            def on_train_end(self, *x, **k): witness("Training end")

        class Rows(torch.utils.data.Dataset):
            def __len__(self) -> int:
                return 512

            def __getitem__(self, i):
                g = torch.Generator().manual_seed(i)
                return {"input_ids": torch.randint(0, 1000, (64,), generator=g),
                        "attention_mask": torch.ones(64, dtype=torch.long), "labels": torch.tensor(i % 2)}

        model = BertForSequenceClassification(BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                                                         num_attention_heads=2, intermediate_size=256))
        with tempfile.TemporaryDirectory() as d:
            args = TrainingArguments(output_dir=d, num_train_epochs=2, per_device_train_batch_size=32,
                                     per_device_eval_batch_size=32, eval_strategy="epoch", report_to=[],
                                     save_strategy="no", logging_strategy="no", disable_tqdm=True)
            trainer = Trainer(model=model, args=args, train_dataset=Rows(), eval_dataset=Rows(),
                              callbacks=[GputopCallback(), Witness()])
            trainer.train()
            witness("After training")  # the wrapped train() took its row as it returned
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"pid": os.getpid(), "framework": a.framework, "rows": seen}, fh, indent=1)
    print(f"callbacks.py {a.framework}: {len(seen)} witnessed rows", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
