"""What the agent thread answers to gputop's requests (wire.Request): the
holders frame, and the row label of a dump gputop asked for (the dump
itself is _dumps')."""

from __future__ import annotations

import time
from typing import Any

LABEL_DUMP = "dump"  # wire.LabelDump: the row a dump gputop asked for makes


def holders_frame(rid: int, dev: int | None = None) -> dict[str, Any]:
    """Answer a holders request (of torch device dev, else the current
    one: an end row asks for its device); runs on the agent thread, never
    the user's."""
    report: Any = None
    try:
        from . import _holders  # written alongside; absent in minimal installs

        fn = getattr(_holders, "holders_report", None)
        if fn is not None:
            report = fn() if dev is None else fn(f"{_holders._parse_device(None)[0]}:{dev}")
    except Exception:
        report = None
    f: dict[str, Any] = {"dev": 0, "total": 0, "skipped": 0, "groups": []}
    if isinstance(report, dict):
        f.update({k: v for k, v in report.items() if k not in ("type", "t", "id", "pid")})
    f.update({"type": "holders", "t": time.time_ns(), "id": rid})
    return f
