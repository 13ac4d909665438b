"""gputop's in-process agent: torch's caching-allocator counters, labelled
snapshots and out-of-memory events, streamed to a running gputop.

    import gputop
    gputop.attach()                      # 100 Hz, to $GPUTOP_SOCKET or the default socket
    tracker = gputop.Tracker()           # drop-in for the article's GPUMemoryTracker
    tracker.snapshot("Training start")
    with gputop.phase("eval"):
        ...
    gputop.cleanup()                     # gc + empty_cache, snapshots around it

Standard library only, plus torch when it is there. Without torch (or
without CUDA) everything still imports and runs: snapshot() returns {},
Tracker says that CUDA is not available. ``GPUTOP=0`` in the environment
turns the agent off: nothing is started or sent, but snapshot(), Tracker
and cleanup() still return (and print) the local values.

Protocol: newline-delimited JSON over a Unix stream socket, version 1; the
frames are defined in the repository's wire/frames.go and described in
agent/README.md.
"""

from __future__ import annotations

import time
from typing import Any

from . import _backend, _cupy, _jax, _torch
from ._agent import Agent
from ._disabled import Disabled
from ._env import enabled, socket_path
from ._lifecycle import attach as _attach  # (and registers the agent's exit and fork handlers)
from ._lifecycle import current as _current
from ._tracker import Tracker, cleanup, phase, snapshot

# the framework the agent reads: torch's caching allocator (tests install a fake GPU)
_backend.install(_torch.TorchBackend())
# and the frameworks beside it, read once the program has imported them
_backend.add_framework(_jax.JaxBackend())
_backend.add_framework(_cupy.CuPyBackend())

__version__ = "0.1.0"

__all__ = [
    "Tracker",
    "attach",
    "cleanup",
    "cuda_available",
    "detach",
    "enabled",
    "holders",
    "load_ipython_extension",
    "phase",
    "snapshot",
    "socket_path",
    "status",
    "unload_ipython_extension",
]


def attach(rate_hz: float = 100, socket: str | None = None,
           history: int | None = None, layout_rate: float | None = None) -> Agent | Disabled:
    """Start streaming this process's allocator counters to gputop.

    A daemon thread reads every CUDA device this process has initialised,
    rate_hz times a second (at most 1000), with one
    ``torch._C._cuda_memoryStats(i)`` call per device, and sends allocated,
    reserved, peak, reserved peak, inactive split bytes, alloc retries and
    OOM count to the gputop listening on ``socket`` (default: see
    :func:`socket_path`). It also registers torch's out-of-memory observer,
    so an OOM reaches gputop with the allocator state at that moment, and
    answers gputop's requests for a holders report.

    It never raises into or blocks the calling code: when gputop is not
    running it retries quietly (50 ms doubling to 1 s) and samples nothing;
    when gputop is slow, the oldest samples are dropped and counted. A bye
    is sent at interpreter exit (at most 1 s). Each sample takes the GIL
    for one stats call per device: on an H200 about 1% of the time at
    100/s, the cost a CPU-bound training loop can feel; a lower rate_hz
    takes it less often.

    history=N turns on torch's allocation history
    (``torch.cuda.memory._record_memory_history(max_entries=N,
    stacks="python")``: the stack of every live block and the last N
    allocator events, about 2 µs per allocation), each entry labelled with
    the current snapshot label or phase; history=0 turns it off. Left out,
    ``GPUTOP_HISTORY=N`` in the environment decides; off by default. With
    it on, an out-of-memory error writes a memory dump before the exception
    reaches the caller, and ``snapshot(label, dump=True)`` one at that
    label (see README, "Allocation history and dumps"). What torch cannot
    do (no history in this torch, the cudaMallocAsync backend) is said in
    ``status()["history"]`` and gputop's process pane; nothing raises.

    layout_rate (readings a second; left out, ``GPUTOP_LAYOUT_RATE``, else
    1; 0 turns it off) is how often the allocator's layout is read: its
    segments and blocks, the free bytes inside segments and the largest
    free block, per memory pool (the default one, CUDA graphs' private
    pools, MemPools), and the allocator settings in force, from torch's
    memory snapshot without traces. Each reading is bounded: at most 5%
    of a training step (2 to 50 ms; 2 ms when no step is seen) and 0.3% of
    the time on average; a reading that would take longer is skipped, and
    gputop told why. Every snapshot() row and OOM carries one too (see
    README, "The allocator's layout").

    Idempotent: a second call returns the same handle (applying a new
    rate_hz, socket, history or layout_rate). Returns the handle
    (``.detach()``, ``.status()``), or a do-nothing handle when GPUTOP=0.
    """
    return _attach(rate_hz, socket, history, layout_rate)


def detach() -> None:
    """Stop the agent (flush, bye, at most 1 s). snapshot() and friends do
    not restart it; attach() does."""
    ag = _current(auto=False)
    if ag is not None:
        ag.detach()


def status() -> dict[str, Any]:
    """The agent's state: attached, connected, socket, counters, last_error."""
    ag = _current(auto=False)
    if ag is None:
        d = Disabled("GPUTOP=0" if not enabled() else "not attached").status()
        return d
    return ag.status()


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        return _backend.get().available()
    except Exception:
        return False


def holders(*args: Any, **kwargs: Any) -> Any:
    """Which Python objects keep CUDA memory alive (model parameters,
    optimizer state, lists of tensors, IPython's history...), grouped and
    sized; also sent to gputop when the agent is attached (its holders pane,
    h, shows it, and a recording keeps it). See gputop._holders.holders for
    arguments."""
    try:
        from . import _holders
    except ImportError as e:
        raise ImportError("gputop.holders is not available in this installation") from e
    res = _holders.holders(*args, **kwargs)
    try:
        ag = _current(auto=False)  # never starts an agent of its own
        if ag is not None:
            ag.post({"type": "holders", "t": time.time_ns(), "id": 0, **_holders.report_of(res)}, urgent=True)
    except Exception:
        pass  # the report is the caller's either way
    return res


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gputop``: registers gputop's notebook magics."""
    try:
        from . import _magics
    except ImportError as e:
        raise ImportError("gputop's notebook magics are not available in this installation") from e
    _magics.load_ipython_extension(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext gputop``."""
    try:
        from . import _magics
    except ImportError:
        return
    fn = getattr(_magics, "unload_ipython_extension", None)
    if fn is not None:
        fn(ipython)
