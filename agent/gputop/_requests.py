"""What the agent thread answers to gputop's requests (wire.Request): the
holders frame, and the row label of a dump gputop asked for (the dump
itself is _dumps')."""

from __future__ import annotations

import time
from typing import Any

from ._backend import Backend

LABEL_DUMP = "dump"  # wire.LabelDump: the row a dump gputop asked for makes


def holders_frame(backend: Backend, rid: int, dev: int | None = None) -> dict[str, Any]:
    """Answer a holders request (of device dev, else the current one: an
    end row asks for its device) with the backend's holders walk; runs on
    the agent thread, never the user's."""
    try:
        report = backend.holders_report(dev)
    except Exception:
        report = None
    f: dict[str, Any] = {"dev": 0, "total": 0, "skipped": 0, "groups": []}
    if isinstance(report, dict):
        f.update({k: v for k, v in report.items() if k not in ("type", "t", "id", "pid")})
    f.update({"type": "holders", "t": time.time_ns(), "id": rid})
    return f
