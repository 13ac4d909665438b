"""What holders() returns: HoldersResult, its groups (HolderGroup, the
wire.HolderGroup of a holders frame) and the dicts they become on the wire.
Kept apart from the walk so that code reading a result needs none of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ._format import format_table


@dataclass
class HolderGroup:
    """One kind of reference keeping memory alive (wire.HolderGroup)."""

    kind: str  # parameters, gradients, optimizer_state, variable, container,
    #            autograd_graph, ipython_history, traceback, other
    name: str  # "model1", "optimizer (Adam)", "losses", "Out history"...
    bytes: int  # each storage counted once
    tensors: int  # storages in this group
    examples: list[str] = field(default_factory=list)  # "float32[512, 1000]"
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "name": self.name,
                             "bytes": int(self.bytes), "tensors": int(self.tensors)}
        if self.examples:
            d["examples"] = list(self.examples)
        if self.hint:
            d["hint"] = self.hint
        return d


@dataclass
class HoldersResult:
    """What holders() found. Its repr is the table, so a notebook shows it."""

    groups: list[HolderGroup]
    total: int  # bytes in all groups
    skipped: int  # objects the walk skipped (raised, too many, freed meanwhile)
    dev: int  # device index reported to gputop
    device: str  # what was walked: "cuda", "cuda:1", "cpu"
    took_ms: float
    error: str | None = None  # set when the walk could not run at all
    # the attribution of device dev's allocated bytes (wire.Held), when the
    # device's allocator could be read
    held: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The wire.Holders frame without type / t / id / pid."""
        return {"dev": int(self.dev), "total": int(self.total), "skipped": int(self.skipped),
                "groups": [g.as_dict() for g in self.groups], "took_ms": round(self.took_ms, 3)}

    def find(self, name: str, kind: str | None = None) -> HolderGroup | None:
        """The first group with this name (and kind, when given)."""
        for g in self.groups:
            if g.name == name and (kind is None or g.kind == kind):
                return g
        return None

    def by_kind(self, kind: str) -> list[HolderGroup]:
        return [g for g in self.groups if g.kind == kind]

    def __iter__(self) -> Iterator[HolderGroup]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def table(self, top: int | None = None) -> str:
        return format_table(self, top)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.table())
