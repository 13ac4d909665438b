"""Running a holders walk asked for by the agent thread on the main thread.

The walk reads ``.grad`` and autograd graphs, which autograd's engine writes
without the GIL during backward: so it runs on the main thread between two
bytecodes (a pending call, Py_AddPendingCall), or in the asking thread when
the main thread is parked in C outside torch; when the main thread stays
inside torch, the answer says that it is busy.

Never inside a memory dump: a walk asked for while a dump's data is being
taken (an OOM's, in the failing thread) waits for it, and a pending call
that lands inside one is scheduled again after it, so the dump's time (and
the training thread's stall) is torch's and not the walk's.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from typing import Any, Callable

from .. import _dumps
from ._result import HolderGroup, HoldersResult
from ._walk import _default_device

_PENDING_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_pending: dict[int, Any] = {}  # callbacks not yet called: ctypes must keep them alive


def _on_main_thread(walk: Callable[[Any], HoldersResult], device: Any,
                    timeout: float) -> HoldersResult:
    """walk(device) on the main thread, or here when that thread is parked
    in C outside torch, or a "main thread busy" result; see holders_report.
    Never while a dump's data is being taken (_dumps.taking)."""
    main = threading.main_thread()
    if threading.current_thread() is main or not main.is_alive():
        return walk(device)
    deadline = time.monotonic() + timeout
    while True:
        _dumps.wait_taken(max(0.0, deadline - time.monotonic()))
        box, done = _schedule(walk, device)
        if done is not None and done.wait(max(0.0, deadline - time.monotonic())):
            if "res" in box:
                return box["res"]
            if not box.get("deferred"):
                return walk(device)  # it ran and failed: here, as the thread that asked
            if time.monotonic() < deadline:
                continue  # it landed inside a dump: again, once that is taken
            break
        box["cancelled"] = True
        if done is not None and done.is_set() and "res" in box:
            return box["res"]
        break
    if _dumps.taking():
        return _busy("a memory dump was being taken (at an out-of-memory error) for all of "
                     f"{timeout:g} s", device)
    if _main_is_parked(main):
        return walk(device)
    return _busy(f"the main thread stayed inside torch (a backward, an optimizer step) for {timeout:g} s, "
                 "and autograd writes .grad and graphs without the GIL meanwhile", device)


def _schedule(walk: Callable[[Any], HoldersResult], device: Any) -> tuple[dict[str, Any], threading.Event | None]:
    """walk(device) as a pending call of the main thread: (its box, set
    with "res", or "deferred" when it landed inside a dump that thread was
    taking; the event set once it ran), or no event when it could not be
    scheduled."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def work(_arg: Any) -> int:
        try:
            _pending.pop(id(cb), None)
            if box.get("cancelled"):
                pass
            elif _dumps.taking() == threading.get_ident():
                box["deferred"] = True
            else:
                box["res"] = walk(device)
        except BaseException:
            pass
        finally:
            done.set()
        return 0

    cb = _PENDING_CB(work)
    _pending[id(cb)] = cb
    try:
        scheduled = ctypes.pythonapi.Py_AddPendingCall(cb, None) == 0
    except Exception:
        scheduled = False
    if not scheduled:
        _pending.pop(id(cb), None)
        return box, None
    return box, done


def _busy(why: str, device: Any) -> HoldersResult:
    return HoldersResult([HolderGroup(
        "other", "main thread busy", 0, 0, [],
        why + "; ask again, or call gputop.holders() from the program")],
        0, 0, 0, str(device or _default_device()), 0.0,
        held={"t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
              "skipped": why})


def _main_is_parked(main: threading.Thread) -> bool:
    """True when the main thread waits in C outside torch (an event loop, a
    queue, a sleep, a REPL prompt): no backward of its own is running then.
    Inside torch's Python code (backward, an optimizer step) it is busy."""
    try:
        frame = sys._current_frames().get(main.ident)  # type: ignore[arg-type]
    except Exception:
        return False
    if frame is None:
        return True  # no Python frame: a REPL prompt, or interpreter shutdown
    name = str(frame.f_globals.get("__name__", ""))
    return not (name == "torch" or name.startswith("torch."))
