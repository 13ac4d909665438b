"""Owners that frameworks put between the user's variables and the memory:
a Hugging Face or Lightning Trainer (it keeps the model, its optimizer and
scheduler), DDP and FSDP wrappers (their gradient buckets are C++ memory no
walk reaches), and torch.compile's caches (they keep the parameters of a
model the program let go). Recognised by their classes' names and modules,
never by importing a framework; the hints (_hints) name them."""

from __future__ import annotations

import sys
from typing import Any

# (top-level module, class name) of a Trainer anywhere in a type's MRO -> what to call it
_TRAINERS = {
    ("transformers", "Trainer"): "a Hugging Face Trainer",
    ("lightning", "Trainer"): "a Lightning Trainer",
    ("pytorch_lightning", "Trainer"): "a Lightning Trainer",
}
# module classes whose gradient buckets or flat parameters live in C++
_WRAPPERS = {"DistributedDataParallel": "DDP", "FullyShardedDataParallel": "FSDP"}


def trainer(tp: type) -> str:
    """What to call a Trainer type ("" when tp is none)."""
    try:
        for cls in tp.__mro__:
            top = str(getattr(cls, "__module__", "") or "").split(".")[0]
            kind = _TRAINERS.get((top, cls.__name__))
            if kind:
                return kind
    except Exception:
        pass
    return ""


def wrapper(cls_name: str) -> str:
    """DDP / FSDP for their module classes ("" for any other)."""
    return _WRAPPERS.get(cls_name, "")


def compiled() -> bool:
    """torch.compile has compiled a graph in this process (dynamo's count)."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    counters: Any = getattr(dynamo, "counters", None)
    try:
        return bool(counters is not None and counters["stats"]["unique_graphs"])
    except Exception:
        return False
