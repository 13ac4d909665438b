"""The process side of `gputop run -- CMD`: the rows a process gets without
a line of gputop in its code.

`gputop run` puts a sitecustomize on PYTHONPATH that calls on_torch() once
torch is imported. From there:

* at CUDA's initialisation (torch.cuda._lazy_call: torch runs it inside
  its lazy init, before the first allocation) the agent attaches and the
  counters are read: the "Process start" row, sent once the agent has told
  gputop about the device (a mark for a device gputop does not know yet
  would be dropped);
* each OOM is a row through the agent's OOM observer, as always;
* at interpreter exit, before the agent says bye, "Process end": an end
  row, so its verdict says what still holds the memory.

A process that imports torch but never uses CUDA (a launcher: torchrun,
accelerate launch) attaches nothing. Nothing here raises into the process.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from typing import Any, Callable

from . import _env, _lifecycle, _oom, _stats, _tracker
from ._agent import Agent

START_LABEL = "Process start"
END_LABEL = "Process end"

_lock = threading.Lock()
_installed = False
_pid = 0
# (time, torch device, Counters) read at CUDA's initialisation; None when
# the process has not initialised CUDA (or the reading failed)
_at_init: tuple[int, int, _stats.Counters] | None = None
_start_sent = False
_note: Callable[[str, str], None] = lambda kind, detail: None


def on_torch(torch: Any, note: Callable[[str, str], None] | None = None) -> None:
    """torch has just been imported in a process `gputop run` started:
    attach at its first CUDA use. note(kind, detail) tells gputop run what
    happened (its events file)."""
    global _installed, _pid, _note
    try:
        with _lock:
            if _installed and _pid == os.getpid():
                return
            _installed, _pid = True, os.getpid()
            if note is not None:
                _note = note
        if not _env.enabled():
            return
        _lifecycle.first_device_hooks.append(_first_device)
        # after gputop's own exit handler (gputop is imported by now), so it
        # runs before the bye; it does nothing in a process with no agent
        atexit.register(_at_exit)
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            _at_cuda_init()
            return
        lazy = getattr(cuda, "_lazy_call", None)
        if lazy is None:
            _note("noagent", "this torch has no torch.cuda._lazy_call to attach at its first CUDA use")
            return
        lazy(_at_cuda_init)
    except Exception as e:
        _note("noagent", f"could not watch for CUDA: {type(e).__name__}: {e}")


def _at_cuda_init() -> None:
    """Runs in the thread that first uses CUDA, inside torch's lazy init
    (torch turns an exception here into the user's error: none escapes)."""
    global _at_init
    try:
        t = time.time_ns()
        try:
            _at_init = (t,) + _init_reading()  # type: ignore[assignment]
        except Exception:
            _at_init = None
        if _lifecycle.current(auto=False) is None:
            ag = _lifecycle.attach()
            if not isinstance(ag, Agent):
                _note("noagent", ag.last_error)
                return
        _observe_ooms()
        _note("cuda", "")
    except BaseException:
        pass


def _init_reading() -> tuple[int, _stats.Counters]:
    """The device CUDA came up on and its counters. torch's lazy init has
    not finished (torch.cuda.is_initialized() is still false), so the
    counters are asked of torch directly."""
    src = _stats.source()
    if isinstance(src, _stats.TorchSource):
        import torch  # already imported: on_torch was called with it

        dev = int(torch._C._cuda_getDevice())
        return dev, _stats.counters(torch._C._cuda_memoryStats(dev))
    devs = src.devices()
    dev = devs[0] if devs else (src.current() or 0)
    return dev, src.read(dev)


def _observe_ooms() -> None:
    """Torch's OOM observer, now: the agent thread would register it only
    once it sees the device, and an OOM in the first allocations (a model
    too large for the GPU) must still be a row. The allocator has its
    devices once torch._C._cuda_init has run, which is before this."""
    src = _stats.source()
    if not isinstance(src, _stats.TorchSource):
        _lifecycle.watch_ooms()
        return
    import torch

    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None and not _oom._torch_oom:
        attach(_lifecycle.on_oom)
        _oom._torch_oom = True


_oom_watch = False  # observe_ooms_from_init has queued its call


def observe_ooms_from_init() -> None:
    """Torch's OOM observer from CUDA's initialisation on (now, if CUDA
    is up already), for the framework callbacks, which attach before the
    model is on the GPU."""
    global _oom_watch
    src = _stats.source()
    if not isinstance(src, _stats.TorchSource):
        _lifecycle.watch_ooms()
        return
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or _oom_watch:
        return
    if cuda.is_initialized():
        _observe_ooms()
    elif hasattr(cuda, "_lazy_call"):
        _oom_watch = True
        cuda._lazy_call(_observe_ooms_quietly)


def _observe_ooms_quietly() -> None:
    try:
        _observe_ooms()
    except BaseException:
        pass


def _first_device(ag: Any, devs: list[int]) -> None:
    """The agent thread has found this process's first CUDA device (it will
    say hello with it next): the Process start row goes out first."""
    global _start_sent
    if _start_sent or _pid != os.getpid():
        return
    _start_sent = True
    got = _at_init
    if got is not None and got[1] in devs:
        t, readings = got[0], {got[1]: got[2]}
    else:
        # CUDA came up before gputop could watch it: the counters now
        t, src = time.time_ns(), _stats.source()
        readings = {d: src.read(d) for d in devs}
    ag.post({
        "type": "mark", "t": t, "label": START_LABEL, "kind": "snapshot",
        "devs": [{"dev": d, "allocated": c.allocated, "reserved": c.reserved, "peak": c.peak,
                  "held": None} for d, c in readings.items()],
    }, urgent=True)


def _at_exit() -> None:
    # registered after gputop's own exit handler, so it runs before the bye
    if _pid != os.getpid():
        return
    try:
        if _lifecycle.current(auto=False) is not None:
            _tracker.snapshot(END_LABEL, end=True)
    except BaseException:
        pass
