"""Snapshots from code: snapshot(), phase(), cleanup() and Tracker, the
drop-in for the GPUMemoryTracker of "How to clear GPU memory after PyTorch
model training without restarting kernel".

All of them read the allocator in the caller's thread (one stats call per
device, the values must be those of this instant) and hand a mark to the
agent thread, which sends it at its next tick (not at once: waking it
would hand it the GIL in the middle of the caller's call).
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Any, Iterator

from . import _agent, _stats

MB = 1024 ** 2  # the reference divides by 1024**2 and calls it MB; so do we


def _take(label: str, kind: str, devs: list[int] | None = None
          ) -> tuple[dict[int, _stats.Counters], int]:
    """Read devs (default: every initialised device) and queue a mark."""
    t = time.time_ns()
    # gputop refuses a mark without a label (and the connection with it)
    try:
        label = str(label)
    except Exception:
        label = ""
    if not label.strip():
        label = "(no label)"
    vals: dict[int, _stats.Counters] = {}
    src = _stats.source()
    try:
        if devs is None:
            devs = src.devices()
        read = src.read
        for d in devs:
            vals[d] = read(d)
    except Exception:
        return vals, t
    if vals:
        try:
            ag = _agent.current(auto=True)
            if ag is not None:
                ag.post({
                    "type": "mark", "t": t, "label": label, "kind": kind,
                    "devs": [{"dev": d, "allocated": c.allocated, "reserved": c.reserved,
                              "peak": c.peak} for d, c in vals.items()],
                })
        except Exception:
            pass
    return vals, t


def snapshot(label: str) -> dict[int, dict[str, int]]:
    """Take a labelled snapshot of every CUDA device this process uses.

    Returns {device index: {"allocated", "reserved", "peak", "reserved_peak",
    "inactive", "alloc_retries", "ooms"}}, torch's exact allocator values in
    bytes (counts for the last two) at this instant, and sends them to gputop
    as a row of its snapshot table and a chart marker. The agent is started
    on first use (see :func:`attach`); without gputop running the values are
    only returned. With GPUTOP=0 nothing is sent, the values are still
    returned. Before CUDA is initialised (or without torch) it returns {}.
    Costs one allocator stats call per device; never raises.
    """
    vals, _ = _take(label, "snapshot")
    fields = _stats.Counters._fields
    return {d: dict(zip(fields, c)) for d, c in vals.items()}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Mark the start and end of a phase, e.g. ``with gputop.phase("eval"):``.

    gputop shows "name (start)" and "name (end)" rows and markers with the
    allocator values at both moments. The end is marked even when the block
    raises. Also usable as a decorator.
    """
    _take(name, "phase_start")
    try:
        yield
    finally:
        _take(name, "phase_end")


def _sum(vals: dict[int, _stats.Counters], field: str) -> int:
    return sum(getattr(c, field) for c in vals.values())


def cleanup(verbose: bool = True, *, reset_peak: bool = True,
            tracker: Tracker | None = None) -> dict[str, Any]:
    """Release what can be released, as the reference full_cleanup does.

    gc.collect(), then for every initialised device torch.cuda.synchronize(),
    torch.cuda.empty_cache(), torch.cuda.reset_peak_memory_stats() and
    torch.cuda.ipc_collect(), with snapshots "Before cleanup" and "After
    cleanup" around it (through ``tracker`` when one is given, so they also
    land in its table).

    Peak: with reset_peak (the default, as in the reference) the peak
    counter restarts from what is still allocated, so rows taken after the
    cleanup show the peak of what came after it (the next training run in a
    notebook), not the old run's. Nothing is lost: the old peak is in the
    "Before cleanup" row, taken before the reset, and earlier rows keep
    their values. Pass reset_peak=False to keep the peak running.

    Returns {"released_allocated_bytes", "released_reserved_bytes",
    "released_allocated_mb", "released_reserved_mb", "before", "after"}
    where before/after are per-device values as snapshot() returns them.
    Errors from torch itself (a broken CUDA context) propagate.
    """
    src = _stats.source()
    cuda = src.available()
    devs = None
    if tracker is not None:
        idx = tracker._index()
        devs = [] if idx is None else [idx]

    def take(label: str) -> dict[int, _stats.Counters]:
        if tracker is not None:
            return tracker._record(label)[1]
        return _take(label, "snapshot")[0]

    before = take("Before cleanup") if cuda else {}
    gc.collect()
    if cuda:
        targets = devs if devs is not None else src.devices()
        for d in targets:
            src.synchronize(d)
        src.empty_cache()
        if reset_peak:
            for d in targets:
                src.reset_peak(d)
        src.ipc_collect()
    after = take("After cleanup") if cuda else {}
    ra = _sum(before, "allocated") - _sum(after, "allocated")
    rr = _sum(before, "reserved") - _sum(after, "reserved")
    if verbose:
        if cuda:
            print(f"Cleanup complete - Allocated: {_sum(after, 'allocated') / MB:.2f} MB, "
                  f"Cached: {_sum(after, 'reserved') / MB:.2f} MB "
                  f"(released {ra / MB:.2f} MB allocated, {rr / MB:.2f} MB cached)")
        else:
            print("Cleanup complete - CUDA not available (only gc.collect ran)")
    return {
        "released_allocated_bytes": ra,
        "released_reserved_bytes": rr,
        "released_allocated_mb": ra / MB,
        "released_reserved_mb": rr / MB,
        "before": {d: c._asdict() for d, c in before.items()},
        "after": {d: c._asdict() for d, c in after.items()},
    }


def _parse_device(device: Any) -> tuple[bool, int | None]:
    """(is CUDA, explicit index or None for the current device)."""
    if device is None:
        return True, None
    if isinstance(device, int) and not isinstance(device, bool):
        return True, device
    kind = getattr(device, "type", None)
    if kind is not None:  # torch.device
        return kind == "cuda", getattr(device, "index", None)
    s = str(device).strip().lower()
    if s == "cuda":
        return True, None
    if s.startswith("cuda:") and s[5:].isdigit():
        return True, int(s[5:])
    return False, None


class Tracker:
    """Drop-in for the reference GPUMemoryTracker that also reports to gputop.

    ``tracker.snapshot(label)`` prints ``[label] Allocated: .. MB, Cached: ..
    MB, Peak: .. MB`` and appends a dict with label, allocated_mb, cached_mb,
    max_allocated_mb (MB = 1024**2 bytes, as in the reference) plus the exact
    allocated_bytes, reserved_bytes, peak_bytes, device and t (ns since the
    epoch); ``print_summary()`` prints the same table as the reference;
    ``reset_peak()`` resets torch's peak counter. Each snapshot is also sent
    to gputop (see :func:`snapshot`), for this tracker's device only.
    """

    def __init__(self, device: Any = "cuda") -> None:
        self.device = device
        self.snapshots: list[dict[str, Any]] = []

    def _index(self) -> int | None:
        is_cuda, idx = _parse_device(self.device)
        if not is_cuda:
            return None
        if idx is None:
            try:
                idx = _stats.source().current()
            except Exception:
                idx = None
            if idx is None:
                idx = 0  # CUDA not initialised yet: nothing allocated anywhere
        return idx

    def snapshot(self, label: str) -> dict[str, Any] | None:
        """Record, print and return the allocator state of this device.

        Returns None (and says why) when CUDA is not available, like the
        reference, which returns None then.
        """
        return self._record(label)[0]

    def _record(self, label: str) -> tuple[dict[str, Any] | None, dict[int, _stats.Counters]]:
        if not _stats.source().available():
            print(f"[{label}] CUDA not available")
            return None, {}
        idx = self._index()
        if idx is None:
            print(f"[{label}] {self.device} is not a CUDA device")
            return None, {}
        vals, t = _take(label, "snapshot", [idx])
        c = vals.get(idx, _stats.ZERO)
        snap = {
            "label": label,
            "allocated_mb": c.allocated / MB,
            "cached_mb": c.reserved / MB,
            "max_allocated_mb": c.peak / MB,
            "device": idx,
            "t": t,
            "allocated_bytes": c.allocated,
            "reserved_bytes": c.reserved,
            "peak_bytes": c.peak,
        }
        self.snapshots.append(snap)
        print(f"[{label}] Allocated: {snap['allocated_mb']:.2f} MB, "
              f"Cached: {snap['cached_mb']:.2f} MB, "
              f"Peak: {snap['max_allocated_mb']:.2f} MB")
        return snap, vals

    def reset_peak(self) -> None:
        """Reset torch's peak counter (allocated_bytes.all.peak) of this device."""
        src = _stats.source()
        if not src.available():
            return
        idx = self._index()
        if idx is not None and idx in src.devices():
            src.reset_peak(idx)

    def print_summary(self) -> None:
        """Print every snapshot as the reference's summary table."""
        print("\n" + "=" * 60)
        print("GPU Memory Summary")
        print("=" * 60)
        for snap in self.snapshots:
            print(f"  {snap['label']:30} "
                  f"Alloc: {snap['allocated_mb']:8.2f} MB | "
                  f"Cache: {snap['cached_mb']:8.2f} MB | "
                  f"Peak: {snap['max_allocated_mb']:8.2f} MB")
        print("=" * 60)

    def cleanup(self, verbose: bool = True, *, reset_peak: bool = True) -> dict[str, Any]:
        """:func:`cleanup` with its two snapshots recorded in this tracker."""
        return cleanup(verbose, reset_peak=reset_peak, tracker=self)
