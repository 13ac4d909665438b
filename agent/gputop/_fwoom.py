"""Out-of-memory errors of the frameworks beside torch, which have no
observer like torch's: XLA's (JAX raises jaxlib's XlaRuntimeError,
JaxRuntimeError in newer versions, "RESOURCE_EXHAUSTED: Out of memory
while trying to allocate N bytes") and CuPy's
(cupy.cuda.memory.OutOfMemoryError, "Out of memory allocating N bytes").
The agent sees one when it ends the program or a thread: sys.excepthook
and threading.excepthook, wrapped once the agent finds a framework's
device, send an oom frame with the framework's figures then, before the
program's own hook runs (its exit handler then flushes it to gputop).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any, Callable

from . import _backend

# XLA's two messages: the BFC allocator's ("Out of memory while trying to
# allocate 7406166528 bytes.", which names no device) and PJRT's
# ("Failed to allocate request for 176.00MiB (184549376B) on device
# ordinal 0": the device's ordinal in this process, as local_hardware_id)
_JAX = re.compile(r"Out of memory while trying to allocate (\d{1,20}) bytes")
_JAX_ORDINAL = re.compile(r"Failed to allocate request for [^()\n]{0,32}\((\d{1,20})B\) on device ordinal (\d{1,6})")
_CUPY = re.compile(r"Out of memory allocating ([\d,]{1,32}) bytes")
MAX_ERROR = 1024  # wire.MaxOOMErrorBytes; a message is read (and sent) this far only

_lock = threading.Lock()
_installed = False


def classify(exc: BaseException) -> tuple[str, int, int | None] | None:
    """(framework, bytes asked (0 when the message does not say), the
    device the message names (None when it names none)) of an
    out-of-memory error of JAX or CuPy, else None. Only the message's
    first MAX_ERROR characters are read."""
    names = {c.__name__ for c in type(exc).__mro__}
    msg = str(exc)[:MAX_ERROR]
    if names & {"XlaRuntimeError", "JaxRuntimeError"} and "RESOURCE_EXHAUSTED" in msg:
        m = _JAX_ORDINAL.search(msg)
        if m:
            return "jax", int(m.group(1)), int(m.group(2))
        m = _JAX.search(msg)
        return "jax", int(m.group(1)) if m else 0, None
    if "OutOfMemoryError" in names and type(exc).__module__.startswith("cupy"):
        m = _CUPY.search(msg)
        return "cupy", int(m.group(1).replace(",", "")) if m else 0, None
    return None


def _no_agent() -> Any:
    return None


# the process's attached agent, or None: set by _lifecycle, which knows it
# (this module is below the agent, which installs the hooks)
current: Callable[[], Any] = _no_agent


def report(exc: BaseException) -> bool:
    """Send an oom frame for exc when it is a JAX or CuPy out-of-memory
    error; True when it was one."""
    got = classify(exc)
    if got is None:
        return False
    name, asked, named = got
    ag = current()
    if ag is None:
        return True
    fw = _backend.framework_devices()
    devs = [d for d, fbs in sorted(fw.items()) if any(fb.name == name for fb in fbs)]
    # the device the message names; else the framework's only one; else
    # unknown (dev_unknown), never a guess: the first one's figures go
    # with it, and gputop says the error named no device
    unknown = False
    if named is not None and named in devs:
        dev = named
    elif len(devs) == 1 and named is None:
        dev = devs[0]
    else:
        dev, unknown = (devs[0] if devs else 0), True
    figures = _backend.read_frameworks([fb for fb in fw.get(dev, []) if fb.name == name], dev)
    msg = str(exc).encode("utf-8", "replace")[:MAX_ERROR].decode("utf-8", "ignore")
    frame: dict[str, Any] = {"type": "oom", "t": time.time_ns(), "dev": dev, "requested": asked,
                             "allocated": 0, "reserved": 0, "peak": 0,
                             "framework": name, "error": msg, "frameworks": figures}
    if unknown:
        frame["dev_unknown"] = True
    ag.post(frame, urgent=True)
    return True


def install() -> None:
    """Wrap sys.excepthook and threading.excepthook (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    prev = sys.excepthook

    def hook(typ: Any, value: Any, tb: Any) -> None:
        try:
            report(value)
        except Exception:
            pass
        prev(typ, value, tb)

    sys.excepthook = hook
    prev_thread = threading.excepthook

    def thread_hook(args: Any) -> None:
        try:
            report(args.exc_value)
        except Exception:
            pass
        prev_thread(args)

    threading.excepthook = thread_hook
