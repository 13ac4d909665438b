"""The process side of `gputop run -- CMD`: the rows a process gets without
a line of gputop in its code.

`gputop run` puts a sitecustomize on PYTHONPATH that calls on_torch() once
torch is imported. From there:

* at CUDA's initialisation (torch.cuda._lazy_call: torch runs it inside
  its lazy init, before the first allocation) the agent attaches and the
  counters are read: the "Process start" row, sent once the agent has told
  gputop about the device (a mark for a device gputop does not know yet
  would be dropped);
* with GPUTOP_MEMORY_CAP set (gputop fit), the allocator is capped there
  too, before the first allocation (_cap);
* each OOM is a row through the agent's OOM observer, as always;
* at interpreter exit, before the agent says bye, "Process end": an end
  row, so its verdict says what still holds the memory.

A process that imports torch but never uses CUDA (a launcher: torchrun,
accelerate launch) attaches nothing. Nothing here raises into the process.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any, Callable

from . import _backend, _cap, _env, _lifecycle, _tracker
from ._agent import Agent

START_LABEL = "Process start"
END_LABEL = "Process end"

_lock = threading.Lock()
_installed = False
_pid = 0
# (time, torch device, Counters) read at CUDA's initialisation; None when
# the process has not initialised CUDA (or the reading failed)
_at_init: tuple[int, int, _backend.Counters] | None = None
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
        _hook_rows()
        # torch's backend: now when CUDA is up, else at its lazy init
        why = _backend.get().at_init(_at_cuda_init)
        if why:
            _note("noagent", why)
    except Exception as e:
        _note("noagent", f"could not watch for CUDA: {type(e).__name__}: {e}")


_hooked = 0  # the pid whose rows are hooked


def _hook_rows() -> None:
    """The Process start row at the first device, the Process end row at
    exit: once per process, whichever framework came first."""
    global _hooked
    with _lock:
        if _hooked == os.getpid():
            return
        _hooked = os.getpid()
    _lifecycle.first_device_hooks.append(_first_device)
    # after gputop's own exit handler (gputop is imported by now), so it
    # runs before the bye; it does nothing in a process with no agent
    atexit.register(_at_exit)


def on_framework(name: str, module: Any, note: Callable[[str, str], None] | None = None) -> None:
    """JAX or CuPy has just been imported in a process `gputop run`
    started: attach now (the agent reads nothing until the framework has a
    GPU: JAX's backend created, CuPy's pool in use; it never creates
    either), with the Process start row at the framework's first device
    and the Process end row at exit, as for torch."""
    global _pid, _note
    try:
        with _lock:
            _pid = os.getpid()
            if note is not None:
                _note = note
        if not _env.enabled():
            return
        _hook_rows()
        if _lifecycle.current(auto=False) is None:
            ag = _lifecycle.attach()
            if not isinstance(ag, Agent):
                _note("noagent", ag.last_error)
                return
        _note("framework", name)
    except Exception as e:
        _note("noagent", f"could not watch {name}: {type(e).__name__}: {e}")


def _at_cuda_init() -> None:
    """Runs in the thread that first uses CUDA, inside torch's lazy init
    (torch turns an exception here into the user's error: none escapes)."""
    global _at_init
    try:
        t = time.time_ns()
        try:
            # torch's lazy init has not finished (torch.cuda.is_initialized()
            # is still false): the backend reads the device coming up
            _at_init = (t,) + _backend.get().init_reading()  # type: ignore[assignment]
        except Exception:
            _at_init = None
        # the memory cap (gputop fit) before the first allocation
        _cap.apply(_backend.get(), _at_init[1] if _at_init is not None else 0, _note)
        if _lifecycle.current(auto=False) is None:
            ag = _lifecycle.attach()
            if not isinstance(ag, Agent):
                _note("noagent", ag.last_error)
                return
        # the OOM observer now: the agent thread would register it only once
        # it sees the device, and an OOM in the first allocations (a model
        # too large for the GPU) must still be a row
        _lifecycle.watch_ooms(initialising=True)
        _note("cuda", "")
    except BaseException:
        pass


_oom_watch = False  # observe_ooms_from_init has asked for it


def observe_ooms_from_init() -> None:
    """The OOM observer from the framework's initialisation on (now, if it
    is up already), for the framework callbacks, which attach before the
    model is on the GPU."""
    global _oom_watch
    if _oom_watch:
        return
    _oom_watch = not _backend.get().at_init(_observe_ooms_quietly)


def _observe_ooms_quietly() -> None:
    try:
        _lifecycle.watch_ooms(initialising=True)
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
    fw = _backend.framework_devices()
    if got is not None and got[1] in devs:
        t, readings = got[0], {got[1]: got[2]}
    else:
        # CUDA came up before gputop could watch it: the counters now
        t, backend = time.time_ns(), _backend.get()
        readings = {d: backend.read(d) for d in devs if d not in fw or d in backend.devices()}
    rows = [{"dev": d, "allocated": c.allocated, "reserved": c.reserved, "peak": c.peak,
             "held": None} for d, c in readings.items()]
    for row in rows:
        if row["dev"] in fw:
            row["frameworks"] = _backend.read_frameworks(fw[row["dev"]], row["dev"])
    for d, fbs in fw.items():
        if d not in readings:  # JAX's or CuPy's device only: its own figures
            rows.append({"dev": d, "allocated": 0, "reserved": 0, "peak": 0, "no_torch": True,
                         "frameworks": _backend.read_frameworks(fbs, d)})
    ag.post({"type": "mark", "t": t, "label": START_LABEL, "kind": "snapshot", "devs": rows}, urgent=True)


def _at_exit() -> None:
    # registered after gputop's own exit handler, so it runs before the bye
    if _pid != os.getpid():
        return
    try:
        if _lifecycle.current(auto=False) is not None:
            _tracker.snapshot(END_LABEL, end=True)
    except BaseException:
        pass
