"""The process around the agent: at interpreter exit the agent flushes and
says bye (at most STOP_TIMEOUT_S; longer, up to DUMP_EXIT_WAIT_S, while a
dump the program asked for is still to be written: the agent thread is a
daemon, so leaving earlier would cut the file off), and a process forked from a traced one
closes its copies of the agent's socket and pipe. Registered when gputop is
imported; the process-wide agent they act on is _agent's.
"""

from __future__ import annotations

import atexit
import os
import threading

from . import _agent, _dumps

DUMP_EXIT_WAIT_S = 60.0


def _at_exit() -> None:
    ag = _agent._current
    if ag is not None and ag.pid == os.getpid():
        try:
            dumping = bool(ag._dump_jobs or ag._dump_requests or _dumps._writing)
            ag._stop(_agent.STOP_TIMEOUT_S + (DUMP_EXIT_WAIT_S if dumping else 0))
        except BaseException:
            pass


def _after_fork_in_child() -> None:
    # The child has no agent thread, only copies of the parent's socket and
    # pipe. Close them: a DataLoader worker holding the parent's socket open
    # would hide the parent's death from gputop.
    _agent._lock = threading.Lock()
    ag, _agent._current = _agent._current, None
    _agent._detached = False
    if ag is not None:
        ag._stopping = True
        ag.conn.close()
        for fd in (ag._wake_r, ag._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
