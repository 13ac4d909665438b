"""torch's out-of-memory observer: registered once the agent sees a CUDA
device (torch cannot remove one, so once per process), it queues an oom
frame with the allocator's state at that moment on the current agent.

With allocation history on (_history) it first writes a memory dump
(_dumps), here in the failing thread: torch calls the observer before it
raises, so the dump shows the memory as it was when the allocation failed,
before the exception unwinds anything; and it is written before the
exception can end the process, which it often does.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from . import _dumps, _history, _stats

_torch_oom = False  # torch's OOM observer is registered


def register(src: _stats.Source, on_oom: Callable[[int, int, int, int], None]) -> None:
    # torch has no way to remove an observer: register once per process for
    # torch (once per injected source in tests) and let the callback find
    # whichever agent is current.
    global _torch_oom
    torch_wide = isinstance(src, _stats.TorchSource)
    if _torch_oom if torch_wide else getattr(src, "_gputop_oom", False):
        return
    try:
        if src.oom_observer(on_oom):
            if torch_wide:
                _torch_oom = True
            else:
                src._gputop_oom = True  # type: ignore[attr-defined]
    except Exception:
        pass


def observer(current: Callable[[], Any]) -> Callable[[int, int, int, int], None]:
    """The callback to register: it posts an oom frame to the agent that
    current() returns when the allocation fails."""

    def _on_oom(device: int, alloc: int, device_limit: int, device_free: int) -> None:
        """torch's out-of-memory observer; runs in the thread whose allocation
        failed, so it reads one device and queues: nothing that can raise or wait.

        torch passes the device, the size asked for, the most it may hold on the
        device (its total memory, or less under set_per_process_memory_fraction)
        and CUDA's free memory."""
        try:
            ag = current()
            if ag is None or not ag.alive:
                return
            t = time.time_ns()
            src = _stats.source()
            try:
                c = src.read(int(device))
            except Exception:
                c = _stats.ZERO
            frame = {
                "type": "oom", "t": t, "dev": int(device),
                "requested": int(alloc), "free": int(device_free), "limit": int(device_limit),
                "allocated": c.allocated, "reserved": c.reserved, "peak": c.peak,
            }
            if _history.on:
                try:
                    frame["dump"] = _dumps.dump(src.memory_api(), "OOM", wait=_dumps.DUMP_WAIT_S)
                except Exception as e:
                    frame["dump"] = {"error": f"the dump failed: {type(e).__name__}: {e}"}
            ag.post(frame, urgent=True)
        except BaseException:
            pass

    return _on_oom
