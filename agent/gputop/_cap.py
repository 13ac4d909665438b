"""GPUTOP_MEMORY_CAP: the most the allocator may hold on the device a
process initialises CUDA on, set at that initialisation, before the first
allocation (`gputop fit` sets it in each child). A run that needs more
then fails at once with an out-of-memory error, as it would on a GPU of
that size, and the OOM observer reports the cap as the limit.

The value is a number of bytes, or "free": the device's free memory at
that moment (what the process could have, its CUDA context already
taken). A cap above the free memory is kept, and said: the device runs
out first. What was done goes to gputop run's events file as one line,
"cap dev=D cap=C free=F total=T", or "cap dev=D error=WHY", which
`gputop fit` reads. Nothing here raises into the process.
"""

from __future__ import annotations

import os
from typing import Any, Callable

ENV = "GPUTOP_MEMORY_CAP"


def apply(backend: Any, dev: int, note: Callable[[str, str], None]) -> None:
    """Cap device dev's allocator as $GPUTOP_MEMORY_CAP asks (nothing when
    it is unset), and note what was done."""
    spec = os.environ.get(ENV, "").strip()
    if not spec:
        return
    try:
        note("cap", f"dev={dev} " + _cap(backend, dev, spec))
    except Exception as e:
        note("cap", f"dev={dev} error={type(e).__name__}: {e}")


def _cap(backend: Any, dev: int, spec: str) -> str:
    free, total = backend.memory_info(dev)
    if spec.lower() == "free":
        cap = free
    else:
        try:
            cap = int(spec)
        except ValueError:
            return f"error={ENV}={spec[:40]!r} is neither a number of bytes nor 'free'"
        if cap <= 0:
            return f"error={ENV}={cap} is not a number of bytes above 0"
    cap = min(cap, total)
    backend.cap_memory(dev, cap, total)
    return f"cap={cap} free={free} total={total}"
