"""Snapshots from code: snapshot(), phase(), cleanup() and Tracker, the
drop-in for the GPUMemoryTracker of "How to clear GPU memory after PyTorch
model training without restarting kernel".

All of them read the allocator in the caller's thread (one stats call per
device, the values must be those of this instant) and hand a mark to the
agent thread, which sends it at its next tick (not at once: waking it
would hand it the GIL in the middle of the caller's call).

Each row carries the allocator's layout of its devices, read then when
the reading fits its bound (_layout), else the agent's latest one.

Every row also walks the live tensors right after the counters are read,
in the caller's thread, for its ledger: what each device's allocated bytes
are made of (parameters, gradients, optimizer state, activations, other
tensors, workspaces), stopped after _holders.LEDGER_LIMIT_S (200 ms);
ledger=False skips it. An end row ("After cleanup", "Training end", a
phase's end; see _wire.is_end_label) takes from the same walk the holders
of each device, so that gputop's verdict says what still holds the memory;
its walk stops after _holders.WALK_LIMIT_S (2 s); verdict=False skips the
holders. The step rows of the framework callbacks (every_n_steps) take no
ledger unless asked (ledger_every_step=True).
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Any, Iterator, NamedTuple

from . import _backend, _dumps, _fwcleanup, _history, _lifecycle, _peaklines, _wire

MB = 1024 ** 2  # the reference divides by 1024**2 and calls it MB; so do we


_ROW_LABEL = {"phase_start": " (start)", "phase_end": " (end)"}  # as gputop names the row


class _Taken(NamedTuple):
    vals: dict[int, _backend.Counters]  # by device
    t: int
    held: dict[int, dict[str, Any]]  # end rows: the attribution of each device
    ledgers: dict[int, dict[str, Any]]  # what each device's allocated bytes are made of
    # the frameworks beside torch (JAX, CuPy) on each device they use (wire.Framework)
    frameworks: dict[int, list[dict[str, Any]]] = {}


def take(label: str, kind: str, devs: list[int] | None = None, end: bool | None = None,
          verdict: bool = True, dump: bool = False, ledger: bool = True) -> _Taken:
    """Read devs (default: every initialised device) and queue a mark; the
    live tensors are walked first for the ledger (unless ledger is false)
    and, on an end row (end, else the label decides), the holders; with
    dump, its data (torch's _snapshot()) is taken here (this moment's) and the
    agent thread writes it (_dumps) before the mark goes out."""
    t = time.time_ns()
    # gputop refuses a mark without a label (and the connection with it)
    try:
        label = str(label)
    except Exception:
        label = ""
    if not label.strip():
        label = "(no label)"
    if _history.on:
        _history.label(label, kind)  # what follows in this thread carries the label
    vals: dict[int, _backend.Counters] = {}
    held: dict[int, dict[str, Any]] = {}
    ledgers: dict[int, dict[str, Any]] = {}
    backend = _backend.get()
    fwdevs = _backend.framework_devices()
    fwvals: dict[int, list[dict[str, Any]]] = {}
    is_end = _wire.is_end_label(label + _ROW_LABEL.get(kind, "")) if end is None else bool(end)
    try:
        if fwdevs:
            torch_devs = set(backend.devices())
            devs = sorted(torch_devs | set(fwdevs)) if devs is None else devs
            # each framework's own figures, read now too (what holds
            # them on an end row): torch's are read only where torch is
            for d in devs:
                if d in fwdevs:
                    fwvals[d] = _backend.read_frameworks(fwdevs[d], d, held=is_end and verdict)
            tdevs = [d for d in devs if d in torch_devs]
        else:
            tdevs = backend.devices() if devs is None else devs
        read = backend.read
        for d in tdevs:
            vals[d] = read(d)
    except Exception:
        return _Taken(vals, t, held, ledgers, fwvals)
    if not vals and not fwvals:
        return _Taken(vals, t, held, ledgers)
    limits: dict[int, int] = {}
    try:
        for d in vals:
            lim = backend.limit(d)
            if lim:
                limits[d] = lim
    except Exception:
        pass
    layouts: dict[int, dict[str, Any]] = {}
    try:
        ag = _lifecycle.current(auto=True)
        if ag is not None:
            layouts = ag.layouts.for_mark(list(vals))
    except Exception:
        pass
    state: Any = None
    dump_error = ""
    if dump:
        try:
            running = _lifecycle.current(auto=False)
            dump_error = _dumps.busy(running.pending_dumps if running is not None else 0)
            if not dump_error:
                state, taken = _dumps.take(backend.history())
        except Exception as e:
            dump_error = f"torch.cuda.memory._snapshot() failed: {type(e).__name__}: {e}"
    peak: tuple[Any, dict[int, int], str] | None = None
    # the blocks at the interval's peak by line (_peaklines), from the dump's
    # data when taken, else from a snapshot that imports nothing
    if _history.on and (state is not None or not backend.snapshot_imports()):
        try:
            peak = _peaklines.take(backend.history(), list(vals), t, state)
        except Exception:
            peak = None
    try:
        if vals and (is_end or ledger):  # else the walk has nothing to give
            held, ledgers = _walk(list(vals), is_end, verdict, ledger)
        ag = _lifecycle.current(auto=True)
        if ag is not None:
            frame: dict[str, Any] = {
                "type": "mark", "t": t, "label": label, "kind": kind,
                "devs": [{"dev": d, "allocated": c.allocated, "reserved": c.reserved,
                          "peak": c.peak, "held": held.get(d), "layout": layouts.get(d),
                          "ledger": ledgers.get(d)}
                         for d, c in vals.items()],
            }
            for dv in frame["devs"]:
                if dv["dev"] in limits:  # the cap a forecast measures against
                    dv["limit"] = limits[dv["dev"]]
                if fwvals.get(dv["dev"]):
                    dv["frameworks"] = fwvals[dv["dev"]]
            for d, fs in fwvals.items():
                if d not in vals and fs:  # JAX's or CuPy's device only: no torch figures
                    frame["devs"].append({"dev": d, "allocated": 0, "reserved": 0, "peak": 0,
                                          "no_torch": True, "frameworks": fs})
            if end is not None:
                frame["end"] = bool(end)
            if peak is not None and peak[0] is None:
                for dv in frame["devs"]:
                    dv["peak_lines"] = _peaklines.skipped(t, peak[2])
            elif peak is not None:
                frame["_peaklines"] = (peak[0], peak[1])  # replayed by the agent thread (_agent)
            if state is not None:
                ag.post_dump(frame, state, taken)
            else:
                if dump_error:
                    frame["dump"] = {"error": dump_error}
                ag.post(frame)
        elif state is not None:
            _dumps.write(state, label, t, taken)  # no agent thread: written here
    except Exception:
        pass
    return _Taken(vals, t, held, ledgers, fwvals)


def _walk(devs: list[int], is_end: bool, verdict: bool,
          ledger: bool) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """One walk for a row: an end row's attribution of each device
    (wire.Held), and each device's ledger (wire.Ledger) unless ledger is
    false; a device's ledger is left out where the framework has none."""
    want_held = is_end and verdict
    got: dict[int, dict[str, Any]] | None = None
    why = "this framework has no holders walk"
    failed = ""
    if want_held or ledger:
        try:
            got = _backend.get().row_walk(devs, want_held, bool(ledger))
        except ImportError as e:  # this installation has no walk
            why = str(e)
        except Exception as e:
            failed = f"the holders walk failed: {type(e).__name__}: {e}"
    held: dict[int, dict[str, Any]] = {}
    ledgers: dict[int, dict[str, Any]] = {}
    for d in devs:
        w = (got or {}).get(d) or {}
        if is_end:
            if not verdict:
                held[d] = _no_held("the holders walk was turned off for this row (verdict=False)")
            elif w.get("held") is not None:
                held[d] = w["held"]
            else:
                held[d] = _no_held(failed or f"gputop's holders walk is not available here: {why}")
        if not ledger:
            continue
        if w.get("ledger") is not None:
            ledgers[d] = w["ledger"]
        elif failed:
            ledgers[d] = {"t": time.time_ns(), "allocated": 0, "reserved": 0, "params": 0, "grads": 0,
                          "optimizer": 0, "activations": 0, "other_tensors": 0, "workspace": 0,
                          "skipped": failed.encode("utf-8", "replace")[:256].decode("utf-8", "ignore")}
    return held, ledgers


def _no_held(why: str) -> dict[str, Any]:
    return {"t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0, "skipped": why}


def snapshot(label: str, *, end: bool | None = None, verdict: bool = True,
             dump: bool = False, ledger: bool = True) -> dict[int, dict[str, Any]]:
    """Take a labelled snapshot of every CUDA device this process uses.

    Returns {device index: {"allocated", "reserved", "peak", "reserved_peak",
    "inactive", "alloc_retries", "ooms"}}, torch's exact allocator values in
    bytes (counts for the last two) at this instant, and sends them to gputop
    as a row of its summary and a chart marker. The agent is started
    on first use (see :func:`attach`); without gputop running the values are
    only returned. With GPUTOP=0 nothing is sent, the values are still
    returned. Before CUDA is initialised (or without torch) it returns {}.
    Costs one allocator stats call per device; never raises.

    The row's ledger: the live tensors are walked at once (in this thread,
    at most 200 ms; past that the ledger says it was skipped) and "ledger"
    is added to each device's dict: of torch's allocated bytes, what is
    parameters and buffers ("params"), their gradients ("grads"), optimizer
    state ("optimizer"), tensors autograd saved for backward
    ("activations"), other tensors ("other_tensors") and cuBLAS/cuBLASLt
    workspaces ("workspace"), each block counted once; "uncounted" says
    what the walk could not count. ledger=False skips it (no walk then,
    unless the row is an end row).

    An end row (end=True; by default a label such as "After cleanup" or
    "Training end") also takes the holders of each device from that walk
    and adds "held" to its dict: the bytes named Python objects hold ("python"),
    torch's cuBLAS/cuBLASLt workspaces ("internal"), what nothing accounts
    for ("unaccounted") and the largest holders ("top"), from which gputop
    gives the row its verdict. The walk takes tens of milliseconds and stops
    after 2 s (then "held" says so); verdict=False skips it.

    dump=True also takes a dump at this moment (every live
    block with the stack that allocated it, when history is on: see
    attach(history=N)) and has the agent thread write it where memory_viz
    opens it; gputop's row names the file (status()["dumps"] lists them).
    Taking the dump's data holds the GIL here (milliseconds; the write does
    not wait).
    """
    got = take(label, "snapshot", end=end, verdict=verdict, dump=dump, ledger=ledger)
    fields = _backend.Counters._fields
    out: dict[int, dict[str, Any]] = {d: dict(zip(fields, c)) for d, c in got.vals.items()}
    for d, h in got.held.items():
        out[d]["held"] = h
    for d, led in got.ledgers.items():
        out[d]["ledger"] = led
    for d, fs in got.frameworks.items():
        out.setdefault(d, {})["frameworks"] = fs
    return out


@contextlib.contextmanager
def phase(name: str, *, verdict: bool = True, ledger: bool = True) -> Iterator[None]:
    """Mark the start and end of a phase, e.g. ``with gputop.phase("eval"):``.

    gputop shows "name (start)" and "name (end)" rows and markers with the
    allocator values at both moments. The end is marked even when the block
    raises. "name (end)" is an end row: its holders are walked for the
    verdict (see :func:`snapshot`; verdict=False skips it). Both rows carry
    a ledger (ledger=False: neither). Also usable as a decorator.
    """
    take(name, "phase_start", ledger=ledger)
    try:
        yield
    finally:
        take(name, "phase_end", verdict=verdict, ledger=ledger)


def _sum(vals: dict[int, _backend.Counters], field: str) -> int:
    return sum(getattr(c, field) for c in vals.values())


def cleanup(verbose: bool = True, *, reset_peak: bool = True,
            tracker: Tracker | None = None, verdict: bool = True) -> dict[str, Any]:
    """Release what can be released, as the reference full_cleanup does, and
    what torch keeps that a cleanup can release safely.

    In order: gc.collect(); for every initialised device
    torch.cuda.synchronize(); torch's cuBLAS/cuBLASLt workspaces
    (torch._C._cuda_clearCublasWorkspaces(), where torch has it: torch
    allocates one per thread and stream that ran a matmul, 32 MiB each on a
    Hopper GPU, and keeps them as allocated memory); torch.cuda.empty_cache();
    torch.cuda.reset_peak_memory_stats(); torch.cuda.ipc_collect(). Around
    it the snapshots "Before cleanup" and "After cleanup" (through
    ``tracker`` when one is given, so they also land in its table); "After
    cleanup" is an end row, whose holders are walked for gputop's verdict
    (verdict=False skips that). Meant for when training has stopped: a
    workspace freed under a matmul running in another thread would be
    reused too soon.

    Peak: with reset_peak (the default, as in the reference) the peak
    counter restarts from what is still allocated, so rows taken after the
    cleanup show the peak of what came after it (the next training run in a
    notebook), not the old run's. Nothing is lost: the old peak is in the
    "Before cleanup" row, taken before the reset, and earlier rows keep
    their values. Pass reset_peak=False to keep the peak running.

    Returns {"released_allocated_bytes", "released_reserved_bytes",
    "released_allocated_mb", "released_reserved_mb", "before", "after",
    "steps", "held"}: before/after are per-device values as snapshot()
    returns them; steps lists each step that ran, in order, as {"step",
    "released_allocated_bytes", "released_reserved_bytes"}; held is the
    After cleanup row's attribution by device (see snapshot()). Errors from
    torch itself (a broken CUDA context) propagate.

    JAX and CuPy, where the program uses them: after gc.collect() (whose
    share is measured for them too), CuPy's default memory pool's and
    pinned pool's free_all_blocks() (the blocks arrays use stay) and
    jax.clear_caches() (compiled computations; XLA keeps its pool, and no
    array of the user's is ever dropped). "frameworks" lists, per
    framework and device: "before" and "after" (its own figures, by its
    own names), "in_use" / "reserved" (which of those names are its in-use
    and held figures), "released_in_use_bytes", "released_reserved_bytes",
    "in_use_bytes", "reserved_bytes" (after), "steps" (each step's share)
    and, for JAX, what is still live: "live_arrays", "live_array_bytes"
    and "held" (the arrays grouped by the variable holding them, else by
    shape and dtype). Their figures are in the Before / After cleanup rows
    too, with the end row's verdict.
    """
    backend = _backend.get()
    cuda = backend.available()
    devs = None
    if tracker is not None:
        idx = tracker._index()
        devs = [] if idx is None else [idx]

    def row(label: str) -> _Taken:
        if tracker is not None:
            return tracker._record(label, verdict=verdict)[1]
        return take(label, "snapshot", verdict=verdict)

    targets: list[int] = []
    if cuda:
        targets = devs if devs is not None else backend.devices()
    # the frameworks beside torch (JAX, CuPy): their own steps and figures
    fwdevs = _backend.framework_devices()
    if devs is not None:
        fwdevs = {d: fbs for d, fbs in fwdevs.items() if d in devs}
    fw = _fwcleanup.Run(fwdevs)
    if not cuda and fw:  # no torch rows to take through the tracker

        def row(label: str) -> _Taken:
            return take(label, "snapshot", verdict=verdict)

    def totals() -> tuple[int, int]:
        a = r = 0
        for d in targets:
            c = backend.read(d)
            a, r = a + c.allocated, r + c.reserved
        return a, r

    steps: list[dict[str, Any]] = []

    def step(name: str, fn: Any) -> None:
        a0, r0 = totals()
        if fn() is False:
            return  # the framework has no such call: the step did not run
        a1, r1 = totals()
        steps.append({"step": name, "released_allocated_bytes": a0 - a1,
                      "released_reserved_bytes": r0 - r1})

    rows = cuda or bool(fw)
    before = row("Before cleanup") if rows else _Taken({}, 0, {}, {})
    step("gc.collect", fw.measured("gc.collect", gc.collect))
    if cuda:
        for s in backend.cleanup_steps(targets, reset_peak):
            if s.measured:
                step(s.name, s.run)
            else:
                s.run()
    fw.release()
    after = row("After cleanup") if rows else _Taken({}, 0, {}, {})
    fws = fw.report()
    ra = _sum(before.vals, "allocated") - _sum(after.vals, "allocated")
    rr = _sum(before.vals, "reserved") - _sum(after.vals, "reserved")
    if verbose:
        if cuda:
            freed = [f"{s['step']} {s['released_allocated_bytes'] / MB:.2f} MB allocated"
                     if s["released_allocated_bytes"] else f"{s['step']} {s['released_reserved_bytes'] / MB:.2f} MB cached"
                     for s in steps if s["released_allocated_bytes"] or s["released_reserved_bytes"]]
            print(f"Cleanup complete - Allocated: {_sum(after.vals, 'allocated') / MB:.2f} MB, "
                  f"Cached: {_sum(after.vals, 'reserved') / MB:.2f} MB "
                  f"(released {ra / MB:.2f} MB allocated, {rr / MB:.2f} MB cached"
                  + (": " + ", ".join(freed) if freed else "") + ")")
            for d, h in after.held.items():
                line = _still_held(h)
                if line:
                    print(f"  cuda:{d}: {line}" if len(after.held) > 1 else f"  {line}")
        elif not fws:
            print("Cleanup complete - CUDA not available (only gc.collect ran)")
        else:
            print("Cleanup complete")
        for r in fws:
            print("  " + _fwcleanup.line(r, len({x["device"] for x in fws}) > 1))
    return {
        "released_allocated_bytes": ra,
        "released_reserved_bytes": rr,
        "released_allocated_mb": ra / MB,
        "released_reserved_mb": rr / MB,
        "before": {d: c._asdict() for d, c in before.vals.items()},
        "after": {d: c._asdict() for d, c in after.vals.items()},
        "steps": steps,
        "held": after.held,
        "frameworks": fws,
    }


def _still_held(h: dict[str, Any]) -> str:
    """A line on what still holds memory after a cleanup ("" when nothing of
    the user's does)."""
    if h.get("skipped"):
        return f"could not tell what still holds memory: {h['skipped']}"
    py = int(h.get("python", 0))
    if py <= 0:
        un = int(h.get("unaccounted", 0))
        if un > 0:
            return (f"{un / MB:.2f} MB still allocated that no Python object reaches and that "
                    "is no cuBLAS workspace: gputop cannot tell what holds it")
        return ""
    names = []
    for g in h.get("top", ())[:3]:
        n = int(g.get("tensors", 0))
        names.append(f"{g.get('name')} {int(g.get('bytes', 0)) / MB:.2f} MB "
                     f"({n} tensor{'s' if n != 1 else ''})")
    line = f"still held: {py / MB:.2f} MB by " + (", ".join(names) or "tensors the walk could not name")
    top = h.get("top") or [{}]
    if top[0].get("hint"):
        line += f": {top[0]['hint']}"
    return line


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
                idx = _backend.get().current()
            except Exception:
                idx = None
            if idx is None:
                idx = 0  # CUDA not initialised yet: nothing allocated anywhere
        return idx

    def snapshot(self, label: str, *, end: bool | None = None,
                 verdict: bool = True, dump: bool = False, ledger: bool = True) -> dict[str, Any] | None:
        """Record, print and return the allocator state of this device.

        Returns None (and says why) when CUDA is not available, like the
        reference, which returns None then. The row's ledger is added to
        the dict as "ledger" (see :func:`snapshot`; ledger=False skips it);
        an end row also walks the holders and adds "held".
        """
        return self._record(label, end=end, verdict=verdict, dump=dump, ledger=ledger)[0]

    def _record(self, label: str, end: bool | None = None, verdict: bool = True,
                dump: bool = False, ledger: bool = True) -> tuple[dict[str, Any] | None, _Taken]:
        if not _backend.get().available():
            print(f"[{label}] CUDA not available")
            return None, _Taken({}, 0, {}, {})
        idx = self._index()
        if idx is None:
            print(f"[{label}] {self.device} is not a CUDA device")
            return None, _Taken({}, 0, {}, {})
        got = take(label, "snapshot", [idx], end=end, verdict=verdict, dump=dump, ledger=ledger)
        vals, t = got.vals, got.t
        c = vals.get(idx, _backend.ZERO)
        row = {
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
        if idx in got.held:
            row["held"] = got.held[idx]
        if idx in got.ledgers:
            row["ledger"] = got.ledgers[idx]
        self.snapshots.append(row)
        print(f"[{label}] Allocated: {row['allocated_mb']:.2f} MB, "
              f"Cached: {row['cached_mb']:.2f} MB, "
              f"Peak: {row['max_allocated_mb']:.2f} MB")
        return row, got

    def reset_peak(self) -> None:
        """Reset torch's peak counter (allocated_bytes.all.peak) of this device."""
        backend = _backend.get()
        if not backend.available():
            return
        idx = self._index()
        if idx is not None and idx in backend.devices():
            backend.reset_peak(idx)

    def print_summary(self) -> None:
        """Print every snapshot as the reference's summary table."""
        print("\n" + "=" * 60)
        print("GPU Memory Summary")
        print("=" * 60)
        for row in self.snapshots:
            print(f"  {row['label']:30} "
                  f"Alloc: {row['allocated_mb']:8.2f} MB | "
                  f"Cache: {row['cached_mb']:8.2f} MB | "
                  f"Peak: {row['max_allocated_mb']:8.2f} MB")
        print("=" * 60)

    def cleanup(self, verbose: bool = True, *, reset_peak: bool = True,
                verdict: bool = True) -> dict[str, Any]:
        """:func:`cleanup` with its two snapshots recorded in this tracker."""
        return cleanup(verbose, reset_peak=reset_peak, tracker=self, verdict=verdict)
