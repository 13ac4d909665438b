"""What holders() returns: HoldersResult, its groups (HolderGroup, the
wire.HolderGroup of a holders frame), the dicts they become on the wire and
the table that is a result's repr. Kept apart from the walk so that code
reading a result needs none of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ._format import format_bytes


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
    # device -> what its allocated bytes are made of (wire.Ledger), for the
    # walked device and those a row asked for, where the allocator was read
    ledgers: dict[int, dict[str, Any]] | None = None

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


def format_table(res: HoldersResult, top: int | None = None) -> str:
    head = (f"gputop holders on {res.device}: {format_bytes(res.total)} in "
            f"{len(res.groups)} group{'s' if len(res.groups) != 1 else ''}"
            f" ({res.took_ms:.1f} ms, {res.skipped} skipped)")
    lines = [head]
    if res.error:
        lines.append(f"  walk failed: {res.error}")
    groups = res.groups if top is None else res.groups[:top]
    if not groups:
        if not res.error:
            lines.append(f"  nothing holds {res.device} memory")
        return "\n".join(lines)
    rows = [(format_bytes(g.bytes), str(g.tensors), g.kind, g.name, ", ".join(g.examples[:2]))
            for g in groups]
    hdr = ("BYTES", "TENSORS", "KIND", "HOLDER", "EXAMPLES")
    wid = [max(len(hdr[i]), *(len(r[i]) for r in rows)) for i in range(4)]
    fmt = f"  {{:>{wid[0]}}}  {{:>{wid[1]}}}  {{:<{wid[2]}}}  {{:<{wid[3]}}}  {{}}"
    lines.append(fmt.format(*hdr).rstrip())
    for g, r in zip(groups, rows):
        lines.append(fmt.format(*r).rstrip())
        if g.hint:
            lines.append(f"  {'':>{wid[0]}}  -> {g.hint}")
    if top is not None and len(res.groups) > top:
        lines.append(f"  ... {len(res.groups) - top} more")
    return "\n".join(lines)
