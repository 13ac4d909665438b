"""Running a holders walk asked for by the agent thread on the main thread.

The walk reads ``.grad`` and autograd graphs, which autograd's engine writes
without the GIL during backward: so it runs on the main thread between two
bytecodes (a pending call, Py_AddPendingCall), or in the asking thread when
the main thread is parked in C outside torch; when the main thread stays
inside torch, the answer says that it is busy.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from typing import Any, Callable

from ._result import HolderGroup, HoldersResult
from ._walk import _default_device

_PENDING_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_pending: dict[int, Any] = {}  # callbacks not yet called: ctypes must keep them alive


def _on_main_thread(walk: Callable[[Any], HoldersResult], device: Any,
                    timeout: float) -> HoldersResult:
    """walk(device) on the main thread, or here when that thread is parked
    in C outside torch, or a "main thread busy" result; see holders_report."""
    main = threading.main_thread()
    if threading.current_thread() is main or not main.is_alive():
        return walk(device)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work(_arg: Any) -> int:
        try:
            _pending.pop(id(cb), None)
            if not box.get("cancelled"):
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
    if scheduled and done.wait(timeout):
        res = box.get("res")
        return res if res is not None else walk(device)
    box["cancelled"] = True
    if done.is_set() and "res" in box:
        return box["res"]
    if _main_is_parked(main):
        return walk(device)
    busy = (f"the main thread stayed inside torch (a backward, an optimizer step) for {timeout:g} s, "
            "and autograd writes .grad and graphs without the GIL meanwhile")
    return HoldersResult([HolderGroup(
        "other", "main thread busy", 0, 0, [],
        busy + "; ask again, or call gputop.holders() from the program")],
        0, 0, 0, str(device or _default_device()), 0.0,
        held={"t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
              "skipped": busy})


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
