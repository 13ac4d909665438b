"""A holder while the walk runs (_walker builds them, _hints words their
fix): kept apart so that both need only this, not each other."""

from __future__ import annotations

from typing import Any

from ._classify import _KIND


class _Group:
    """A holder while the walk runs: its category (module, grad, optim, tensor,
    items, history, traceback, other), name, facts for its hint, and the
    storages it won."""

    __slots__ = ("cat", "name", "kind", "meta", "members")

    def __init__(self, cat: str, name: str) -> None:
        self.cat = cat
        self.name = name
        self.kind = _KIND.get(cat, "container")
        self.meta: dict[str, Any] = {}
        self.members: list[tuple[int, Any, str, str]] = []  # (bytes, tensor, role, label)
