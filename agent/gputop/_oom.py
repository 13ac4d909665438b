"""The out-of-memory observer: registered with the backend once the agent
sees a device (torch cannot remove one, so once per backend), it queues an
oom frame with the allocator's state at that moment on the current agent:
its counters and its layout (_layout: the largest free block, the free
bytes in segments, the pools), which say whether the request failed for
fragmentation.

With allocation history on (_history) it first writes a memory dump
(_dumps), here in the failing thread: torch calls the observer before it
raises, so the dump shows the memory as it was when the allocation failed,
before the exception unwinds anything; and it is written before the
exception can end the process, which it often does. The layout is then
summed from the dump's data: torch is asked for its snapshot once.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable

from . import _backend, _dumps, _history

# the backends whose OOMs are observed already
_watched: weakref.WeakSet[_backend.Backend] = weakref.WeakSet()


def register(backend: _backend.Backend, on_oom: Callable[[int, int, int, int], None],
             initialising: bool = False) -> None:
    """Have backend call on_oom at each OOM, once per backend; the callback
    finds whichever agent is current. initialising: from inside the
    framework's initialisation (Backend.watch_ooms)."""
    if backend in _watched:
        return
    try:
        if backend.watch_ooms(on_oom, initialising):
            _watched.add(backend)
    except Exception:
        pass


def observer(current: Callable[[], Any]) -> Callable[[int, int, int, int], None]:
    """The callback to register: it posts an oom frame to the agent that
    current() returns when the allocation fails."""

    def _on_oom(device: int, alloc: int, device_limit: int, device_free: int) -> None:
        """The out-of-memory observer; runs in the thread whose allocation
        failed, so it reads one device and queues: nothing that can raise or wait.

        torch passes the device, the size asked for, the most it may hold on the
        device (its total memory, or less under set_per_process_memory_fraction)
        and CUDA's free memory."""
        try:
            ag = current()
            if ag is None or not ag.alive:
                return
            t = time.time_ns()
            backend = _backend.get()
            try:
                c = backend.read(int(device))
            except Exception:
                c = _backend.ZERO
            frame = {
                "type": "oom", "t": t, "dev": int(device),
                "requested": int(alloc), "free": int(device_free), "limit": int(device_limit),
                "allocated": c.allocated, "reserved": c.reserved, "peak": c.peak,
            }
            layout: list[Any] = []  # (layout, why not), once read

            def read_layout(state: Any = None) -> None:
                try:
                    layout.append(ag.layouts.at_oom(int(device), state))
                except Exception:
                    pass

            if _history.on:
                try:
                    # the layout from the dump's data as soon as it is taken
                    frame["dump"] = _dumps.dump(backend.history(), "OOM", wait=_dumps.DUMP_WAIT_S,
                                                seen=read_layout)
                except Exception as e:
                    frame["dump"] = {"error": f"the dump failed: {type(e).__name__}: {e}"}
            if not layout:
                read_layout()
            if layout:
                frame["layout"], why_not = layout[0]
                if why_not is not None:
                    ag.post(why_not)
            ag.post(frame, urgent=True)
        except BaseException:
            pass

    return _on_oom
