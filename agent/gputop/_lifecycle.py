"""The agent of this process: attach() starts it (one per process),
current() finds it, its detach() ends it for good; what it does when it
first finds a device (the out-of-memory observer, first_device_hooks);
and the process around it: at interpreter exit the agent flushes and says
bye (at most STOP_TIMEOUT_S; longer, up to DUMP_EXIT_WAIT_S, while a dump
the program asked for is still to be written: the agent thread is a
daemon, so leaving earlier would cut the file off), and a process forked
from a traced one closes its copies of the agent's socket and pipe.
The exit and fork handlers are registered when gputop is imported.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Callable

from . import _backend, _env, _fwoom, _history, _oom
from ._agent import DEFAULT_RATE_HZ, STOP_TIMEOUT_S, Agent
from ._disabled import Disabled

DUMP_EXIT_WAIT_S = 60.0

_lock = threading.Lock()
_current: Agent | None = None
_detached = False  # detach() was called: snapshot() must not restart the agent
# called with (agent, devices) on the agent thread when it first finds a
# device, before it says hello with it (gputop run's Process start row)
first_device_hooks: list[Callable[[Agent, list[int]], None]] = []
# the out-of-memory observer: whichever agent is current when an OOM
# happens gets it
on_oom = _oom.observer(lambda: _current)


def attach(rate_hz: float = DEFAULT_RATE_HZ, socket: str | None = None,
           history: int | None = None, layout_rate: float | None = None) -> Agent | Disabled:
    """gputop.attach(): start the process's agent, or configure the running one."""
    global _current, _detached
    if not _env.enabled():
        return Disabled("GPUTOP=0")
    try:
        with _lock:
            _detached = False
            ag = _current
            if ag is None or not ag.alive or ag.pid != os.getpid():
                ag = Agent(rate_hz, socket, layout_rate=layout_rate, on_devices=found_devices,
                           on_detach=_detaching)
                ag.start()
                _current = ag
            else:
                ag.configure(rate_hz, socket, layout_rate)
    except Exception as e:
        return Disabled(f"agent could not start: {e}")
    _ask_history(ag, history)
    return ag


_history_hooked = False  # history is turned on at the framework's initialisation


def _ask_history(ag: Agent, history: int | None) -> None:
    """attach(history=N), else GPUTOP_HISTORY: on at once when the devices
    are up (in the caller: the first allocations after attach() are
    recorded), else inside the framework's initialisation, before its first
    allocation (Backend.at_init: torch's lazy CUDA init); the agent thread
    turns it on when it sees a device where that cannot be."""
    global _history_hooked
    try:
        n = history if history is not None else _history.from_env()
        if n is None:
            return
        hist = ag.backend.history()
        _history.request(n, hist)
        if hist is None and n and not _history_hooked:
            backend = ag.backend
            _history_hooked = not backend.at_init(lambda: _history_at_init(backend))
        ag.wake()
    except Exception:
        pass


def _history_at_init(backend: _backend.Backend) -> None:
    """Inside the framework's initialisation: history as asked, before the
    first allocation (nothing raises into torch's init)."""
    try:
        _history.apply(backend.history(initialising=True))
    except BaseException:
        pass


def current(auto: bool = True) -> Agent | None:
    """The running agent; with auto, start one (unless GPUTOP=0 or after
    an explicit detach) so that snapshot() alone reaches gputop."""
    ag = _current
    # stopping, not alive: the thread sets it as it ends, and snapshot()
    # comes here, often cold, where each Python call costs
    if ag is not None and not ag.stopping:
        return ag
    if not auto or _detached or not _env.enabled():
        return None
    a = attach()
    return a if isinstance(a, Agent) else None


def _detaching(ag: Agent) -> None:
    global _current, _detached
    with _lock:
        if _current is ag:
            _current = None
            _detached = True


def found_devices(ag: Agent, devs: list[int]) -> None:
    """What the process's agent does when it first finds devices: the OOM
    observer, then the first_device_hooks."""
    _oom.register(ag.backend, on_oom)
    for hook in first_device_hooks:
        try:
            hook(ag, devs)
        except Exception:
            pass


def watch_ooms(initialising: bool = False) -> None:
    """Register the OOM observer with the backend now (once per backend);
    initialising: from inside the framework's initialisation, where the
    agent thread has not seen the device yet (_autorun)."""
    _oom.register(_backend.get(), on_oom, initialising)


def reset() -> None:
    """Forget the process's agent, as a forked child must (and tests)."""
    global _lock, _current, _detached, _history_hooked
    _lock = threading.Lock()
    _current = None
    _detached = False
    _history_hooked = False


def _at_exit() -> None:
    ag = _current
    if ag is not None and ag.pid == os.getpid():
        try:
            ag.stop(STOP_TIMEOUT_S + (DUMP_EXIT_WAIT_S if ag.dumping else 0))
        except BaseException:
            pass


def _after_fork_in_child() -> None:
    # The child has no agent thread, only copies of the parent's socket and
    # pipe: the agent closes them.
    ag = _current
    reset()
    if ag is not None:
        ag.abandon()


atexit.register(_at_exit)
_fwoom.current = lambda: current(auto=False)  # whom a JAX or CuPy OOM is reported to
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
