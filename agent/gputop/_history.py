"""The allocation history, on request: ``attach(history=N)`` (or
``GPUTOP_HISTORY=N`` in the environment) turns on the backend's History
(torch's: ``torch.cuda.memory._record_memory_history(max_entries=N,
stacks="python")``), so that every live block of a memory dump (_dumps) carries the Python
stack that allocated it, and the last N allocator events are kept. Off by
default: torch then records nothing.

torch keeps the setting per device allocator, which exist only once CUDA
is initialised, and the agent never initialises CUDA: so history asked for
before that is turned on by the agent thread when it first sees a device
(the same moment it registers the OOM observer), else at once.

Each entry is labelled with the current snapshot label or phase
(``torch.cuda.memory._set_memory_metadata``, where torch has it): a
snapshot("Epoch 5") makes the allocations that follow carry "Epoch 5", a
phase its name until it ends. torch keeps that label per thread, so it is
set in the thread that called snapshot() or phase().

Nothing here raises: what torch cannot do is kept in ``error`` and said
in status() and in the hello gputop shows.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ._backend import History

ENV = "GPUTOP_HISTORY"

asked = 0  # max_entries asked for; 0: not asked (or asked off)
on = 0  # max_entries torch records with now; 0: off
error = ""  # why history that was asked for is off
note = ""  # the last change, for status(): "asked twice", a new max_entries
_lock = threading.Lock()
_set_meta: Any = None  # the backend's labeller (torch's _set_memory_metadata) once history is on
_labels = threading.local()  # the calling thread's label and the phases around it


def from_env() -> int | None:
    """GPUTOP_HISTORY as max_entries: None when unset, 0 for off; a value
    that is no count leaves history off and says so."""
    global error
    v = os.environ.get(ENV, "").strip()
    if not v:
        return None
    if v.lower() in ("0", "off", "false", "no"):
        return 0
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        error = f"{ENV}={v[:40]!r} is not a number of entries; history stays off"
        return None
    return n


def request(n: Any, hist: History | None) -> None:
    """Ask for history with max_entries n (0: off); applied at once when
    the backend's history (None before its devices are initialised) is
    there. A second request for the same n changes nothing."""
    global asked, error, note
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        error = f"history={n!r} is not a number of entries >= 0; history stays as it was"
        return
    with _lock:
        if n == asked:
            if n:
                note = f"history was asked for again with max_entries={n}: it was already asked for; nothing changed"
            return
        if asked and n:
            note = f"history's max_entries changed from {asked} to {n}"
        asked = n
    apply(hist)


def apply(hist: History | None) -> bool:
    """Bring the recording to what was asked; True when that changed what
    the hello says. hist is the backend's history (None: its devices are
    not initialised yet, so nothing can change)."""
    if hist is None:
        return False
    with _lock:
        want = asked
        if want == on or (want and on == 0 and _tried == want):
            return False  # as asked, or it failed for this max_entries already
        return _switch(hist, want)


_tried = 0  # the max_entries whose turning on failed (not retried every second)


def _switch(hist: History, want: int) -> bool:
    global on, error, _set_meta, _tried
    if want == 0:
        try:
            if on:
                hist.stop()
        except Exception:
            pass
        on, error, _set_meta, _tried = 0, "", None, 0
        return True
    _tried = want
    why = hist.why_not() or hist.record(want)
    if why:
        on, error, _set_meta = 0, why, None
        return True
    on, error = want, ""
    _set_meta = hist.labeller()
    return True


def label(text: str, kind: str) -> None:
    """Label the calling thread's allocations from now on: a snapshot's
    label, a phase's name until it ends (then what was before). Cheap when
    history is off; never raises."""
    if not on:
        return
    set_meta = _set_meta
    if set_meta is None:
        return
    try:
        stack = getattr(_labels, "stack", None)
        if stack is None:
            stack = _labels.stack = [""]
        if kind == "phase_start":
            stack.append(text)
        elif kind == "phase_end":
            if len(stack) > 1:
                stack.pop()
        else:
            stack[-1] = text
        set_meta(stack[-1])
    except Exception:
        pass


def status() -> dict[str, Any]:
    """What status() says of history."""
    d: dict[str, Any] = {"max_entries": on, "asked": asked}
    if error:
        d["error"] = error
    if note:
        d["note"] = note
    return d


def _reset() -> None:
    """Forget everything (tests; a forked child)."""
    global asked, on, error, note, _set_meta, _tried
    asked = on = _tried = 0
    error = note = ""
    _set_meta = None
    _labels.__dict__.clear()
