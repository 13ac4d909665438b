"""The reference article's six memory-leak scenarios, as holders_scenarios.py
runs them: the sizes, the code that runs first in every scenario process or
kernel (PRELUDE: the user's helpers, the warm-up, the state the driver
reads), each scenario's cells with the culprit and the hint it must find,
and the fix a hint suggests, as code a user would type.

Imported by holders_scenarios.py; not run on its own.
"""
from __future__ import annotations

import re
from collections.abc import Callable

# sizes: a model of hundreds of MiB, activations sized so that each
# scenario's culprit is its largest holder, as in the article's stories
SIZES = {
    "cuda": {"width": 4096, "depth": 8, "train_batch": 256, "eval_batch": 2048,
             "infer_batch": 8192},
    "cpu": {"width": 512, "depth": 4, "train_batch": 64, "eval_batch": 2048,
            "infer_batch": 8192},
}

# Runs first in every process / kernel: the user's helpers, then a warm-up
# (every shape and path the scenarios use, forward, backward, Adam, no_grad)
# so that lazily created cuBLAS/cuBLASLt workspaces exist before the baseline.
PRELUDE = r'''
import ctypes, gc, json, os, sys
import torch
import torch.nn as nn
import gputop

HS = json.loads(os.environ["HS_CONFIG"])
DEV = HS["device"]


def make_model(width=HS["width"], depth=HS["depth"], classes=10):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers).to(DEV)


def batch(n, width=HS["width"]):
    return torch.randn(n, width, device=DEV), torch.randint(0, 10, (n,), device=DEV)


def train(model, steps=3, batch_size=HS["train_batch"]):
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        x, y = batch(batch_size)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def _hs_alloc():
    if DEV == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    class _MI(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MI
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd, None


def _hs_state():
    alloc, reserved = _hs_alloc()
    res = gputop.holders()
    d = {"allocated": alloc, "reserved": reserved, "total": res.total,
         "skipped": res.skipped, "took_ms": res.took_ms, "error": res.error,
         "groups": [g.as_dict() for g in res.groups]}
    del res
    return d


def _hs_emit():
    # returns None: a value would go through the displayhook and shift _, __, ___
    print("HS_STATE " + json.dumps(_hs_state()))


def _hs_warmup():
    m = make_model()
    train(m, steps=2)
    crit = nn.CrossEntropyLoss()
    for n in (HS["eval_batch"], HS["infer_batch"]):
        x, y = batch(n)
        crit(m(x), y).backward()
        with torch.no_grad():
            m(x)
    del m, x, y, crit
    gputop.cleanup(verbose=False)


def _hs_start():
    # CUDA up without a matmul (no cuBLAS workspace yet), then the baseline
    torch.zeros(1, device=DEV)
    if DEV == "cuda":
        torch.cuda.synchronize()
    gputop.snapshot("Training start")


def _hs_held(vals):
    print("HS_HELD " + json.dumps({str(k): v for k, v in vals.items()}))


def _hs_end(label):
    _hs_held({d: v.get("held") for d, v in gputop.snapshot(label, end=True).items()})


def _hs_cleanup():
    _hs_held(gputop.cleanup(verbose=False)["held"])
'''

WARMUP = "_hs_warmup()"


class Scenario:
    def __init__(self, key: str, title: str, cells: list[tuple[str, str]],
                 culprit: Callable[[dict], bool], culprit_desc: str,
                 hint_re: str | dict[str, str],
                 raises: bool = False) -> None:
        self.key = key
        self.title = title
        self.cells = cells  # (modes "fresh,kernel" / "kernel", source)
        self.culprit = culprit
        self.culprit_desc = culprit_desc
        # the regex the top holder's hint must match (per mode when a dict)
        self.hint_re = (hint_re if isinstance(hint_re, dict)
                        else {"fresh": hint_re, "kernel": hint_re})
        self.raises = raises

    def sources(self, mode: str) -> list[str]:
        return [src for modes, src in self.cells if mode in modes.split(",")]


BOTH = "fresh,kernel"

SCENARIOS = [
    Scenario(
        "a", "model and optimizer never deleted after training",
        [(BOTH, """\
model = make_model()
optimizer = torch.optim.Adam(model.parameters())
criterion = nn.CrossEntropyLoss()
for epoch in range(3):
    x, y = batch(HS["train_batch"])
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print("Training done.")
print(f"Allocated: {_hs_alloc()[0] / 1024**2:.2f} MB")
"""),
         ("kernel", "loss  # a look at the last loss\n")],
        lambda g: bool(re.match(r"(optimizer|model)\b", g["name"])),
        "optimizer / model", r"del (optimizer|model)"),
    Scenario(
        "b", "model1 then model2 created in a row",
        [(BOTH, "model1 = make_model()\ntrain(model1)\n"),
         (BOTH, "model2 = make_model()\ntrain(model2)\n")],
        lambda g: "model1" in g["name"],
        "model1", r"del model1"),
    Scenario(
        "c", "a losses list of GPU loss tensors with grad_fn",
        [(BOTH, """\
model = make_model()
train(model)
criterion = nn.CrossEntropyLoss()
losses = []
for step in range(8):  # validation, without torch.no_grad()
    x, y = batch(HS["eval_batch"])
    loss = criterion(model(x), y)
    losses.append(loss)
print(f"validation loss {sum(l.item() for l in losses) / len(losses):.4f}")
"""),
         ("kernel", "losses[-1]\n")],
        lambda g: g["name"] == "losses" and g["kind"] == "container",
        "losses (container)", r"loss\.item\(\)"),
    Scenario(
        "d", "inference without torch.no_grad() keeping a graph",
        [(BOTH, """\
model = make_model()
model.eval()
x, _y = batch(HS["infer_batch"])
out = model(x)  # forgot torch.no_grad()
pred = out.argmax(1)
"""),
         ("kernel", "out[:2]\n")],
        lambda g: g["name"] == "out" and g["kind"] == "autograd_graph",
        "out (autograd_graph)", r"torch\.no_grad\(\)"),
    Scenario(
        "e", "ref = model; del model",
        [(BOTH, """\
model = make_model()
train(model)
ref = model
del model
gc.collect()
torch.cuda.empty_cache()
"""),
         ],
        lambda g: g["name"] == "ref" or g["name"].startswith("ref "),
        "ref", r"del ref\b"),
    Scenario(
        "f", "exception mid-training kept by sys.last_traceback",
        [(BOTH, """\
def run_training(steps=5):
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss()
    for step in range(steps):
        x, y = batch(HS["eval_batch"])
        loss = criterion(model(x), y)
        if step == 2:
            raise RuntimeError(f"loss diverged at step {step}")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""),
         (BOTH, "run_training()\n")],
        lambda g: g["kind"] == "traceback",
        "traceback",
        {"fresh": r"del sys\.last_type.*sys\.last_traceback", "kernel": r"%gpucleanup"},
        raises=True),
]
BY_KEY = {s.key: s for s in SCENARIOS}


# ---- the fix a hint suggests, as code a user would type ----

_DETACH = re.compile(r"([A-Za-z_][\w.]*) = \1\.detach\(\)")
_DEL = re.compile(r"\bdel ((?:[A-Za-z_][\w.]*)(?:, [A-Za-z_][\w.]*)*)")


def fix_for(g: dict, mode: str) -> str | None:
    """The code the group's hint tells the user to run, or None."""
    hint = g.get("hint") or ""
    path = g["name"]
    if "%gpucleanup" in hint:
        return "%gpucleanup" if mode == "kernel" else None
    m = _DETACH.search(hint)
    if m:
        return f"{m.group(1)} = {m.group(1)}.detach()"
    if "append loss.item()" in hint:
        return f"{path} = [t.item() for t in {path}]"
    if "keep t.detach()" in hint:
        return f"{path} = [t.detach() for t in {path}]"
    m = _DEL.search(hint)
    if m:
        return "del " + m.group(1)
    if "gputop.cleanup()" in hint:
        return "gputop.cleanup()"
    return None


def actionable(groups: list[dict], base: dict[tuple[str, str], int]) -> list[dict]:
    """Groups the scenario made: those present at the baseline (the cuBLAS
    workspaces' "no Python reference", torch's own CPU tensors in a dry run)
    count only when they grew."""
    out = []
    for g in groups:
        if g.get("bytes", 0) <= 0:
            continue
        b = base.get((g["kind"], g["name"]))
        if b is not None and g["bytes"] <= b:
            continue
        out.append(g)
    out.sort(key=lambda g: -g["bytes"])
    return out
