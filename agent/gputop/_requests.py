"""What the agent thread answers to gputop's requests (wire.Request): the
holders frame (torch's walk, and the frameworks beside it: JAX's live
arrays, CuPy's pool), and the row label of a dump gputop asked for (the
dump itself is _dumps')."""

from __future__ import annotations

import time
from typing import Any

from . import _backend
from ._backend import Backend

LABEL_DUMP = "dump"  # wire.LabelDump: the row a dump gputop asked for makes


def holders_frame(backend: Backend, rid: int, dev: int | None = None) -> dict[str, Any]:
    """Answer a holders request (of device dev, else the current one: an
    end row asks for its device) with the backend's holders walk and, where
    frameworks beside torch use the device, their figures and what holds
    their memory (JAX's live arrays); runs on the agent thread, never the
    user's. A device torch has not initialised gets no torch walk."""
    try:
        fw = _backend.framework_devices()
    except Exception:
        fw = {}
    d = dev
    if d is None:
        try:
            d = backend.current()
        except Exception:
            d = None
        if d is None and fw:
            d = min(fw)
    try:
        torch_here = d is None or not fw.get(d) or d in backend.devices()
    except Exception:
        torch_here = True
    report: Any = None
    if torch_here:
        try:
            report = backend.holders_report(dev)
        except Exception:
            report = None
    else:
        report = {"dev": d, "held": {"t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                                     "skipped": f"torch has not initialised cuda:{d} in this process"}}
    f: dict[str, Any] = {"dev": 0, "total": 0, "skipped": 0, "groups": []}
    if isinstance(report, dict):
        f.update({k: v for k, v in report.items() if k not in ("type", "t", "id", "pid")})
    if d is not None and fw.get(d) and f.get("dev") == d:
        fs = _backend.read_frameworks(fw[d], d, held=True)
        if fs:
            f["frameworks"] = fs
    f.update({"type": "holders", "t": time.time_ns(), "id": rid})
    return f
