"""The allocator's layout, read at a low rate: its segments and blocks,
free bytes inside segments, the largest free block, per memory pool, the
settings in force (the backend's layouts(); torch's memory snapshot
without traces). Sent as a `layout` frame per device (wire.LayoutReading),
and read fresh for every mark (snapshot(), phase()) and at an
out-of-memory error, in the thread that asks.

A reading holds the GIL for as long as it takes (torch builds a dict per
block: about 0.6 µs a block on an H200), so each one is bounded before it
is made. Its cost is predicted from the allocator's cheap counters
(layout_size(): segments and blocks) and the cost per block of the last
readings (thread CPU time, so that time spent waiting for the GIL is not
counted). A reading is made only when it is predicted to take at most

* the bound: 5% of a training step, at least FLOOR_S (2 ms) and at most
  CEIL_S (50 ms); FLOOR_S when no step is seen. The step is the period of
  the allocated bytes the agent samples (the rise of each forward pass);
* and what is left of 0.3% of the wall time (AVG_SHARE): readings and the
  marks' readings together run up a debt that drains at that share, so
  readings come further apart when each costs more.

A periodic reading over the bound is skipped, a `layout` frame saying so
("would take ~58 ms with 100,000 blocks; bound 12 ms (5% of a 240 ms
step)"), and the next try waits twice as long as the last (up to
BACKOFF_MAX_S). A mark whose reading does not fit takes the latest
reading instead, when it is at most STALE_S old (its t says when it was
read). At an out-of-memory error the bound is OOM_BOUND_S (250 ms), with
its own 0.3% share: it happens once, and its explanation needs it; past
it a `layout` frame says why there is none.

Rate: attach(layout_rate=HZ), else GPUTOP_LAYOUT_RATE, else 1 a second;
0 turns all of it off. A framework that cannot read the layout
(Unsupported: a torch without torch.cuda.memory_snapshot) gets one `layout` frame per
device saying so, and is not asked again.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import time
import warnings
from typing import Any, Sequence

from ._backend import Backend, Unsupported

ENV = "GPUTOP_LAYOUT_RATE"
DEFAULT_RATE_HZ = 1.0
MAX_RATE_HZ = 10.0
STEP_SHARE = 0.05  # a reading may take this much of a training step
FLOOR_S = 0.002  # ... and never less than this, nor more than CEIL_S
CEIL_S = 0.05
AVG_SHARE = 0.003  # readings take at most this share of the wall time on average
OOM_BOUND_S = 0.25  # a reading at an out-of-memory error
BACKOFF_MAX_S = 60.0
STALE_S = 5.0  # a mark takes the latest reading when it is this recent
# the cost model: a reading of N blocks costs as the last ones did, scaled
# by (N + FIXED_BLOCKS); before any, PRIOR_BLOCK_S a block
FIXED_BLOCKS = 200
PRIOR_BLOCK_S = 1e-6
COST_KEPT = 5
# the step: rises of the allocated bytes over the last STEP_WINDOW_S
STEP_WINDOW_S = 5.0
STEP_SAMPLES = 2048
MIN_SWING = 1 << 20  # a step must move the allocated bytes by this much
MAX_REASON = 256  # wire.MaxSettingBytes bounds "skipped"


def rate_of(value: Any) -> tuple[float, str]:
    """The layout rate asked for (None: GPUTOP_LAYOUT_RATE, else the
    default) and, where the value was refused, why."""
    where = "layout_rate"
    if value is None:
        env = os.environ.get(ENV, "").strip()
        if not env:
            return DEFAULT_RATE_HZ, ""
        value, where = env, ENV
    try:
        r = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        r = math.nan
    if not 0 <= r <= MAX_RATE_HZ:
        shown = repr(value)[:40] if where == "layout_rate" else repr(str(value)[:40])
        return DEFAULT_RATE_HZ, (f"{where}={shown} is not a rate in [0, {MAX_RATE_HZ:g}] "
                                 f"readings a second; using {DEFAULT_RATE_HZ:g}")
    return r, ""


def step_period(series: Sequence[tuple[int, int]]) -> float | None:
    """The training step's period in seconds from (t ns, allocated bytes)
    samples: the mean time between rises through the upper quarter of
    their range, each after a fall through the lower quarter. None when
    the bytes hardly move or rise fewer than three times."""
    if len(series) < 16:
        return None
    vals = [a for _, a in series]
    lo, hi = min(vals), max(vals)
    span = hi - lo
    if span < MIN_SWING:
        return None
    low, high = lo + span / 4, hi - span / 4
    rises: list[int] = []
    was_low = False
    for t, a in series:
        if a >= high:
            if was_low:
                rises.append(t)
            was_low = False
        elif a <= low:
            was_low = True
    if len(rises) < 3:
        return None
    return (rises[-1] - rises[0]) / (len(rises) - 1) / 1e9


def _ms(s: float) -> str:
    ms = s * 1e3
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2g} ms"


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def reason(text: str) -> str:
    """A skip's reason, bounded as gputop bounds it."""
    b = text.encode("utf-8", "replace")
    return text if len(b) <= MAX_REASON else b[:MAX_REASON - 3].decode("utf-8", "ignore") + "…"


class _Debt:
    """Reading time run up, draining at AVG_SHARE of the wall time."""

    def __init__(self) -> None:
        self.s = 0.0
        self.at = time.monotonic()

    def room(self, now: float, cap: float) -> float:
        """How long a reading may take now for the debt to stay under cap."""
        self.s = max(0.0, self.s - (now - self.at) * AVG_SHARE)
        self.at = now
        return cap - self.s

    def spend(self, cost: float, now: float) -> None:
        self.room(now, 0.0)
        self.s += cost


class Layouts:
    """One agent's layout readings: the rate, the bound and the cost model,
    the frames. periodic() runs on the agent thread; for_mark() and
    at_oom() in the thread that took the mark or hit the error."""

    def __init__(self, backend: Backend, rate: Any = None) -> None:
        self.backend = backend
        self.rate, self.note = rate_of(rate)
        if self.note:
            warnings.warn(f"gputop: {self.note}", RuntimeWarning, stacklevel=3)
        self.next_at = 0.0  # monotonic time of the next periodic reading
        self.step_s: float | None = None  # the training step seen, None: none
        self.stopped = ""  # why readings stopped for good
        self.readings = 0
        self.skipped = 0
        self.last_skip = ""
        self.took_ms = 0.0  # the last reading's cost
        self._lock = threading.Lock()
        self._cost: collections.deque[tuple[int, float]] = collections.deque(maxlen=COST_KEPT)
        self._debt = _Debt()
        self._oom_debt = _Debt()
        self._backoff = 0.0
        self._last: dict[int, tuple[float, dict[str, Any]]] = {}  # dev -> (monotonic, layout with t)
        self._blocks: dict[int, int] = {}  # dev -> blocks of its last reading (no counters)
        self._recent: dict[int, collections.deque[tuple[int, int]]] = {}
        self._told: set[int] = set()  # devices told of stopped

    # ---- settings ----

    def set_rate(self, value: Any) -> None:
        """attach(layout_rate=...) on a running agent."""
        rate, note = rate_of(value)
        if note:
            warnings.warn(f"gputop: {note}", RuntimeWarning, stacklevel=4)
        self.note = note
        if rate != self.rate:
            self.rate = rate
            self.next_at = 0.0
            self._backoff = 0.0

    # ---- the step ----

    def observe(self, t: int, dev: int, allocated: int) -> None:
        """A sample's allocated bytes (the agent thread, at send time)."""
        q = self._recent.get(dev)
        if q is None:
            q = self._recent[dev] = collections.deque(maxlen=STEP_SAMPLES)
        q.append((t, allocated))

    def _see_step(self) -> None:
        since = time.time_ns() - int(STEP_WINDOW_S * 1e9)
        found = [p for p in (step_period([x for x in q if x[0] >= since]) for q in self._recent.values())
                 if p is not None]
        self.step_s = min(found) if found else None

    def bound(self) -> tuple[float, str]:
        """The most one reading may take, and why."""
        st = self.step_s
        if st is None:
            return FLOOR_S, "no training step seen"
        b = STEP_SHARE * st
        if b < FLOOR_S:
            return FLOOR_S, f"the least, for a {_ms(st)} step"
        if b > CEIL_S:
            return CEIL_S, f"the most, for a {_ms(st)} step"
        return b, f"5% of a {_ms(st)} step"

    # ---- the cost ----

    def predict(self, blocks: int) -> float:
        """Seconds a reading of blocks blocks is expected to hold the GIL."""
        with self._lock:
            seen = list(self._cost) or [(0, PRIOR_BLOCK_S * FIXED_BLOCKS)]
        est = sorted(c * (blocks + FIXED_BLOCKS) / (b + FIXED_BLOCKS) for b, c in seen)
        return est[len(est) // 2]

    def _sizes(self, devs: Sequence[int]) -> tuple[list[int], int, dict[int, str]]:
        """The devices whose counters could be read, their blocks, and why
        the others could not."""
        ok, blocks, bad = [], 0, {}
        for d in devs:
            try:
                sz = self.backend.layout_size(d)
            except Exception as e:
                bad[d] = reason(f"device {d}'s allocator could not be read: {_why(e)}")
                continue
            ok.append(d)
            blocks += sz[1] if sz is not None else self._blocks.get(d, 0)
        return ok, blocks, bad

    def _read(self, devs: Sequence[int], blocks: int) -> tuple[dict[int, dict[str, Any]], float]:
        """One reading of devs, timed and learnt from: ({dev: layout with t
        and took_ms}, its cost in s). Raises what the backend raised;
        Unsupported stops all readings."""
        t = time.time_ns()
        c0 = time.thread_time()
        try:
            got = self.backend.layouts(devs)
        except Unsupported as e:
            self.stopped = reason(str(e))
            raise
        cost = time.thread_time() - c0
        if got is None:
            self.stopped = "this framework reports no allocator layout"
            return {}, cost
        now = time.monotonic()
        with self._lock:
            self._cost.append((blocks, cost))
            self.readings += 1
            self.took_ms = cost * 1e3
        out = {}
        for d in devs:
            lay = got.get(d)
            if lay is None:
                continue
            lay = dict(lay, t=t, took_ms=round(cost * 1e3, 3))
            out[d] = lay
            self._last[d] = (now, lay)
            self._blocks[d] = int(lay.get("blocks", 0)) + int(lay.get("segments", 0))
        return out, cost

    def _skip(self, devs: Sequence[int], why: str, frames: list[dict[str, Any]]) -> None:
        t = time.time_ns()
        why = reason(why)
        with self._lock:
            self.skipped += len(devs)
            self.last_skip = why
        frames.extend({"type": "layout", "dev": d, "t": t, "skipped": why} for d in devs)

    def _stop(self, devs: Sequence[int], frames: list[dict[str, Any]]) -> None:
        """Say once per device why there is no layout."""
        new = [d for d in devs if d not in self._told]
        self._told.update(new)
        if self.stopped != "this framework reports no allocator layout":
            self._skip(new, self.stopped, frames)

    # ---- the three readings ----

    def periodic(self, devs: Sequence[int], now: float) -> list[dict[str, Any]]:
        """The agent thread's reading when next_at has come: the frames to
        send (a reading per device, or why not). Sets next_at."""
        frames: list[dict[str, Any]] = []
        if not self.rate:
            self.next_at = math.inf
            return frames
        if self.stopped:
            self._stop(devs, frames)
            self.next_at = now + 1.0  # only new devices are told
            return frames
        self._see_step()
        period = 1.0 / self.rate
        held_back = self.backend.snapshot_imports()
        if held_back:
            self._skip(devs, held_back, frames)
            self.next_at = now + self._back_off(period)
            return frames
        bound, why = self.bound()
        ok, blocks, bad = self._sizes(devs)
        for d, w in bad.items():
            self._skip([d], w, frames)
        if not ok:
            self.next_at = now + self._back_off(period)
            return frames
        cost = self.predict(blocks)
        if cost > bound:
            self._skip(ok, f"would take ~{_ms(cost)} with {blocks:,} blocks; bound {_ms(bound)} ({why})", frames)
            self.next_at = now + self._back_off(period)
            return frames
        room = self._debt.room(now, bound)
        if cost > room:
            # within the bound, not within the average: later, no frame
            self.next_at = now + max(period, (cost - room) / AVG_SHARE)
            return frames
        try:
            got, took = self._read(ok, blocks)
        except Unsupported:
            self._stop(ok, frames)
            return frames
        except Exception as e:
            self._skip(ok, f"the reading failed: {_why(e)}", frames)
            self.next_at = now + self._back_off(period)
            return frames
        if self.stopped:
            return frames
        self._debt.spend(took, now)
        frames.extend({"type": "layout", "dev": d, **lay} for d, lay in got.items())
        self._backoff = 0.0
        self.next_at = now + period
        return frames

    def _back_off(self, period: float) -> float:
        self._backoff = min(max(2 * self._backoff, 2 * period), BACKOFF_MAX_S)
        return self._backoff

    def for_mark(self, devs: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Each device's layout for a mark: read now when it fits the bound
        and the average, else the latest reading when recent."""
        if not self.rate or self.stopped:
            return {}
        now = time.monotonic()
        if self.backend.snapshot_imports():
            # the latest readings only
            return {d: lay for d, (at, lay) in list(self._last.items()) if d in devs and now - at <= STALE_S}
        room = self._debt.room(now, self.bound()[0])
        # the last readings' sizes first: a row taken right after another
        # (every step) is told no without a call to the allocator
        if self.predict(sum(self._blocks.get(d, 0) for d in devs)) > room:
            ok, blocks = [], 0
        else:
            ok, blocks, _ = self._sizes(devs)
        if ok and self.predict(blocks) <= room:
            try:
                _, took = self._read(ok, blocks)  # kept as each device's latest
                self._debt.spend(took, now)
            except Exception:
                pass
        return {d: lay for d, (at, lay) in list(self._last.items()) if d in devs and now - at <= STALE_S}

    def at_oom(self, dev: int, state: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the device's layout now, or a layout frame saying why not) at
        an out-of-memory error; from state, the dump's data taken at that
        error, when there is one (the framework is not asked twice)."""
        if not self.rate or self.stopped:
            return None, None
        now = time.monotonic()
        frames: list[dict[str, Any]] = []
        ok, blocks, bad = self._sizes([dev])
        if not ok:
            self._skip([dev], f"at the out-of-memory error: {bad[dev]}", frames)
            return None, frames[0]
        cost = self.predict(blocks)
        room = self._oom_debt.room(now, OOM_BOUND_S)
        if cost > room:
            limit = (f"bound {_ms(OOM_BOUND_S)} at an out-of-memory error" if cost > OOM_BOUND_S else
                     f"the readings at out-of-memory errors took {_ms(OOM_BOUND_S - room)} already")
            self._skip([dev], f"at the out-of-memory error: would take ~{_ms(cost)} with {blocks:,} blocks; {limit}",
                       frames)
            return None, frames[0]
        try:
            got, took = self._read([dev], blocks) if state is None else self._of_state([dev], state)
        except Exception as e:
            self._skip([dev], f"at the out-of-memory error: the reading failed: {_why(e)}", frames)
            return None, frames[0]
        self._oom_debt.spend(took, now)
        return got.get(dev), None

    def _of_state(self, devs: Sequence[int], state: Any) -> tuple[dict[int, dict[str, Any]], float]:
        """The layout of devs from dump data taken already, as _read's
        (kept as each device's latest; its cost is not learnt from: it
        has no call to the framework in it)."""
        t = time.time_ns()
        c0 = time.thread_time()
        got = self.backend.layouts(devs, state) or {}
        cost = time.thread_time() - c0
        now = time.monotonic()
        out = {}
        for d in devs:
            lay = got.get(d)
            if lay is None:
                continue
            lay = dict(lay, t=t, took_ms=round(cost * 1e3, 3))
            out[d] = lay
            self._last[d] = (now, lay)
        return out, cost

    def status(self) -> dict[str, Any]:
        """What status() says of the layout readings."""
        bound, why = self.bound()
        d: dict[str, Any] = {"rate_hz": self.rate, "readings": self.readings, "skipped": self.skipped,
                             "took_ms": round(self.took_ms, 3), "bound_ms": round(bound * 1e3, 3),
                             "bound": why}
        if self.step_s is not None:
            d["step_ms"] = round(self.step_s * 1e3, 1)
        try:
            reading = self.backend.layout_note()
        except Exception:
            reading = ""
        note = "; ".join(x for x in (self.note, reading) if x)
        for k, v in (("last_skip", self.last_skip), ("stopped", self.stopped), ("note", note)):
            if v:
                d[k] = v
        return d
