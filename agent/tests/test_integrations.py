"""The Lightning and Hugging Face callbacks, with the CPU builds of both
frameworks from PyPI, the pretend allocator of fakegpu.py (the training
steps allocate on it, so every row's figures are known), and the real
gputop binary: `gputop run --no-tui --csv` around the unmodified fit."""

from __future__ import annotations

import csv
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import AGENT, FAKE_GPU_PRELUDE

_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
_need("torch")

MiB = 1 << 20

PRELUDE = FAKE_GPU_PRELUDE + "MiB = 1 << 20\n"


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "GPUTOP", "GPUTOP_SOCKET", "GPUTOP_AGENT_PATH")}
    e.update(GPUTOP_AGENT_PATH=str(AGENT), GPUTOP_HOLDERS_DEVICE="cpu", PYTHONPATH=str(AGENT),
             TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return e


def fit(gputop_bin: str, tmp_path: Path, script: str) -> tuple[subprocess.CompletedProcess, list[dict[str, str]]]:
    path = tmp_path / "train.py"
    path.write_text(PRELUDE + textwrap.dedent(script))
    out = tmp_path / "s.csv"
    r = subprocess.run([gputop_bin, "run", "--no-tui", "--source", "agent", "--csv", str(out), "--",
                        sys.executable, str(path)], cwd=tmp_path, env=env(), capture_output=True,
                       text=True, timeout=300)
    with open(out, newline="") as f:
        return r, list(csv.DictReader(f))


def test_callbacks_import_without_their_frameworks() -> None:
    code = textwrap.dedent(
        """
        import sys
        class NoFrameworks:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("lightning", "pytorch_lightning", "transformers"):
                    raise ImportError(f"No module named {name!r} (hidden by the test)")
        sys.meta_path.insert(0, NoFrameworks())
        import gputop.integrations.lightning as L
        import gputop.integrations.transformers as T
        for mod in (L, T):
            try:
                mod.GputopCallback
            except ImportError as e:
                print(e)
        """)
    r = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "gputop.integrations.lightning needs Lightning 2.x: pip install lightning (or pytorch_lightning)",
        "gputop.integrations.transformers needs transformers: pip install transformers",
    ]


LIGHTNING = """
import {pkg} as L
from gputop.integrations.lightning import GputopCallback

gpu.init_cuda()                                 # what torch does at the first CUDA use

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
    def training_step(self, batch, i):
        gpu.alloc(0, MiB)                       # one MiB more each step
        if {fail_at} and self.global_step + 1 == {fail_at}:
            gpu.oom(0, 64 << 30)                 # torch calls the OOM observers, then raises
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return self.layer(batch).pow(2).mean()
    def validation_step(self, batch, i):
        return self.layer(batch).sum()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

data = torch.utils.data.DataLoader(torch.randn(16, 8), batch_size=4)
trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=1,
                    limit_val_batches=1, callbacks=[GputopCallback(every_n_steps=2)])
trainer.fit(Model(), data, data)
print("allocated at the end", gpu.c[0]["allocated"], flush=True)
"""


@pytest.mark.parametrize("pkg", ["lightning.pytorch", "pytorch_lightning"])
def test_lightning_callback_rows(gputop_bin: str, tmp_path: Path, pkg: str) -> None:
    _need(pkg)
    r, rows = fit(gputop_bin, tmp_path, LIGHTNING.format(pkg=pkg, fail_at=0))
    assert r.returncode == 0, r.stderr
    labels = [x["label"] for x in rows]
    assert labels == [
        "Process start", "Sanity check (start)", "Sanity check (end)", "Training start",
        "Step 2", "Step 4", "Validation (start)", "Validation (end)", "Epoch 1",
        "Step 6", "Step 8", "Validation (start)", "Validation (end)", "Epoch 2",
        "Training end", "After teardown", "Process end"], labels
    by = {x["label"]: x for x in rows}
    # one MiB per step, as the allocator counted it
    assert int(by["Step 2"]["allocated_bytes"]) == 2 * MiB
    assert int(by["Epoch 1"]["allocated_bytes"]) == 4 * MiB
    assert int(by["Epoch 2"]["allocated_bytes"]) == 8 * MiB
    # only the run's end rows have verdicts: the evaluation in between does not
    ends = [x["label"] for x in rows if x["verdict"]]
    assert ends == ["After teardown", "Process end"], ends
    assert by["After teardown"]["verdict_basis"] == "holders walk"
    assert int(by["After teardown"]["allocated_bytes"]) == 8 * MiB
    assert "allocated at the end 8388608" in r.stdout


def test_lightning_exception_during_fit(gputop_bin: str, tmp_path: Path) -> None:
    _need("lightning")
    r, rows = fit(gputop_bin, tmp_path, LIGHTNING.format(pkg="lightning.pytorch", fail_at=3))
    assert r.returncode == 1 and "OutOfMemoryError" in r.stderr
    labels = [x["label"] for x in rows]
    assert labels[-3:] == ["OOM", "Exception (OutOfMemoryError)", "Process end"], labels
    oom = rows[-3]
    assert oom["oom_requested_bytes"] == str(64 << 30) and int(oom["allocated_bytes"]) == 3 * MiB
    assert rows[-2]["verdict"] != ""
    assert "asked for 64.00 GiB" in r.stderr       # the OOM explained in the summary


TRANSFORMERS = """
import functools
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from gputop.integrations.transformers import GputopCallback

torch.manual_seed(0)
class Data(torch.utils.data.Dataset):
    def __init__(self, n, alloc):
        self.n, self.alloc = n, alloc
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        return {{"input_ids": torch.randint(0, 50, (8,)), "attention_mask": torch.ones(8, dtype=torch.long),
                "labels": torch.tensor(i % 2)}}

# built from a config: nothing is downloaded
model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=32))
gpu.init_cuda()                                 # what torch does at the first CUDA use
forward = model.forward

@functools.wraps(forward)
def training_forward(*a, **kw):
    if model.training:
        gpu.alloc(0, MiB)                       # one MiB more each training step
    return forward(*a, **kw)
model.forward = training_forward
args = TrainingArguments(output_dir="out", num_train_epochs=2, per_device_train_batch_size=4,
                         per_device_eval_batch_size=4, eval_strategy="epoch", save_strategy="no",
                         logging_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                         dataloader_num_workers=0)
trainer = Trainer(model=model, args=args, train_dataset=Data(8, True), eval_dataset=Data(4, False),
                  callbacks=[GputopCallback(every_n_steps={every})])
{fail}
trainer.train()
print("allocated at the end", gpu.c[0]["allocated"], flush=True)
"""


def test_transformers_callback_rows(gputop_bin: str, tmp_path: Path) -> None:
    _need("transformers")
    r, rows = fit(gputop_bin, tmp_path, TRANSFORMERS.format(every=1, fail=""))
    assert r.returncode == 0, r.stderr
    labels = [x["label"] for x in rows]
    assert labels == [
        "Process start", "Training start", "Step 1", "Step 2", "Epoch 1",
        "Evaluation (start)", "Evaluation (end)", "Step 3", "Step 4", "Epoch 2",
        "Evaluation (start)", "Evaluation (end)", "Training end", "After training", "Process end"], labels
    by = {x["label"]: x for x in rows}
    assert int(by["Step 1"]["allocated_bytes"]) == 1 * MiB
    assert int(by["Epoch 2"]["allocated_bytes"]) == 4 * MiB
    assert [x["label"] for x in rows if x["verdict"]] == ["After training", "Process end"]
    assert "allocated at the end 4194304" in r.stdout


def test_transformers_exception_in_train(gputop_bin: str, tmp_path: Path) -> None:
    _need("transformers")
    fail = textwrap.dedent("""
        @functools.wraps(forward)
        def boom(*a, **kw):
            gpu.oom(0, 64 << 30)
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        model.forward = boom
        """)
    r, rows = fit(gputop_bin, tmp_path, TRANSFORMERS.format(every=1, fail=fail))
    assert r.returncode == 1 and "OutOfMemoryError" in r.stderr
    labels = [x["label"] for x in rows]
    assert labels[-3:] == ["OOM", "Exception (OutOfMemoryError)", "Process end"], labels
    assert rows[-3]["oom_requested_bytes"] == str(64 << 30)
