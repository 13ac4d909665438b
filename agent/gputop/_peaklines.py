"""The blocks live at a row's interval peak, by the line that allocated
them (wire.PeakLines): with allocation history on, at each row the
history's state (torch's ``_snapshot()``: the live blocks with their
stacks, and the trace of allocs and frees) is taken in the caller's
thread, and the agent thread replays the trace backwards from the live
blocks to the highest allocated point since the device's previous row,
and groups the blocks live there by their allocating line: the first
frame outside torch and gputop, as ``gputop dump-info`` puts a block down
to its line.

Bounded: the snapshot and the replay hold the GIL for a time that grows
with the history's entries (about 1.2 µs an entry replayed, measured on
this project's CI machine), so the snapshot is taken only while what the
last one cost, with its replay, stays under DUTY of the time since it (a
row past that says so); the replay stops past LIMIT_S of the agent
thread's CPU time (and says so); at most MAX_LINES lines are sent, the
rest summed and counted. Nothing here raises into the caller.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

MAX_LINES = 8  # wire.MaxPeakLines
MAX_TEXT = 256  # wire.MaxSettingBytes
LIMIT_S = 0.2  # the replay's bound: the agent thread's CPU time
DUTY = 0.05  # the snapshot's share of the time between two of them, at most

# torch's own files (memdump's torchFile), and gputop's
_TORCH = re.compile(r"(^|/)(site|dist)-packages/torch/|(^|/)torch/(nn|optim|autograd|utils|cuda|amp|distributed|"
                    r"_dynamo|_inductor|_functorch|_tensor\.py|functional\.py|_ops\.py)")
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep

_since: dict[int, int] = {}  # each device's previous row, as the trace's time_us
_last = [0.0, 0.0]  # when the last snapshot was taken (perf_counter) and what it and its replay cost (s)


def take(hist: Any, devs: list[int], t_ns: int, state: Any = None) -> tuple[Any, dict[int, int], str]:
    """At a row, in the caller's thread: the history's state (None and why
    when it is not taken; a dump's, taken for the row already, is used as
    it is) and each device's interval start (time_us)."""
    now_us = t_ns // 1000
    since = {d: _since.get(d, 0) for d in devs}
    for d in devs:
        _since[d] = now_us
    if state is not None:
        return state, since, ""
    if hist is None:
        return None, since, "CUDA is not initialised"
    t0 = time.perf_counter()
    last_at, last_cost = _last
    if last_cost > 0 and t0 - last_at < last_cost / DUTY:
        return None, since, (f"the history's snapshot and replay took {last_cost * 1e3:.0f} ms at the last row: "
                             f"taken again {last_cost / DUTY:.1f} s after it at the soonest "
                             f"({DUTY:.0%} of the time between rows)")
    try:
        state = hist.dump_state()
    except Exception as e:
        return None, since, clip(f"torch.cuda.memory._snapshot() failed: {type(e).__name__}: {e}")
    _last[0], _last[1] = t0, time.perf_counter() - t0
    return state, since, ""


def skipped(t_ns: int, why: str) -> dict[str, Any]:
    return {"t": t_ns, "allocated": 0, "lines": [], "skipped": clip(why)}


def clip(s: str) -> str:
    b = s.encode("utf-8", "replace")
    if len(b) <= MAX_TEXT:
        return s
    return b[: MAX_TEXT - 3].decode("utf-8", "ignore") + "..."


def _line(frames: Any) -> tuple[str, int, str] | None:
    """The line a block is put down to: the innermost frame outside torch
    and gputop, else the innermost frame; None without a stack."""
    if not frames:
        return None
    first = None
    for f in frames:
        try:
            fn = str(f.get("filename", ""))
            key = (fn, int(f.get("line", 0)), str(f.get("name", "")))
        except Exception:
            continue
        if first is None:
            first = key
        if not _TORCH.search(fn) and not fn.startswith(_OWN):
            return key
    return first


def lines(state: Any, dev: int, since_us: int, t_ns: int) -> dict[str, Any]:
    """The highest allocated point of dev's trace after since_us (or the
    row's own moment, t_ns) and the blocks live there by allocating line
    (wire.PeakLines). Never raises."""
    t0 = time.thread_time()
    try:
        return _lines(state, dev, since_us, t_ns, t0)
    except Exception as e:
        return skipped(t_ns, f"the history could not be read: {type(e).__name__}: {e}")
    finally:
        _last[1] += time.thread_time() - t0  # the replay counts in the next snapshot's duty


def _lines(state: Any, dev: int, since_us: int, t_ns: int, t0: float) -> dict[str, Any]:
    live: dict[int, tuple[int, Any]] = {}
    for seg in state.get("segments", ()):
        if seg.get("device") != dev:
            continue
        for b in seg.get("blocks", ()):
            if b.get("state") in ("active_allocated", "active_pending_free", "active_awaiting_free"):
                live[b["address"]] = (int(b["size"]), b.get("frames"))
    traces = state.get("device_traces") or []
    tr = traces[dev] if dev < len(traces) else []
    level = sum(s for s, _ in live.values())
    peak, at = level, len(tr)
    i, n = len(tr) - 1, 0
    while i >= 0:
        e = tr[i]
        if int(e.get("time_us", 0)) <= since_us:
            break
        a = e.get("action")
        if a == "alloc":
            level -= int(e.get("size", 0))
        elif a == "free_completed":
            level += int(e.get("size", 0))
        if level > peak:
            peak, at = level, i
        i -= 1
        n += 1
        if n % 4096 == 0 and time.thread_time() - t0 > LIMIT_S:
            return skipped(t_ns, f"the history's trace was not replayed within {LIMIT_S * 1e3:.0f} ms "
                                 f"({n} entries of the interval)")
    # the blocks live at the peak: the entries after it undone
    blocks = dict(live)
    for e in reversed(tr[at:]):
        a = e.get("action")
        if a == "alloc":
            blocks.pop(e.get("addr"), None)
        elif a == "free_completed":
            blocks[e.get("addr")] = (int(e.get("size", 0)), None)
    # a block given back by a free was allocated at its address's latest
    # alloc before the peak
    need = {addr for addr, (_, f) in blocks.items() if f is None}
    j = at - 1
    while need and j >= 0:
        e = tr[j]
        if e.get("action") == "alloc" and e.get("addr") in need:
            addr = e.get("addr")
            blocks[addr] = (blocks[addr][0], e.get("frames") or [])
            need.discard(addr)
        j -= 1
        if j % 4096 == 0 and time.thread_time() - t0 > LIMIT_S:
            break
    groups: dict[tuple[str, int, str], list[int]] = {}
    unknown = 0
    for size, frames in blocks.values():
        key = _line(frames)
        if key is None:
            unknown += size
            continue
        g = groups.setdefault(key, [0, 0])
        g[0] += size
        g[1] += 1
    order = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    out: dict[str, Any] = {
        "t": t_ns if at == len(tr) else (int(tr[at - 1].get("time_us", 0)) * 1000 if at > 0 else 0),
        "allocated": max(peak, 0),
        "lines": [{"file": clip(f), "line": ln, "func": clip(name), "bytes": b, "blocks": k}
                  for (f, ln, name), (b, k) in order[:MAX_LINES]],
    }
    rest = order[MAX_LINES:]
    if rest:
        out["more"] = sum(b for _, (b, _k) in rest)
        out["more_lines"] = len(rest)
    if unknown:
        out["unknown"] = unknown
    out["took_ms"] = round((time.thread_time() - t0) * 1e3, 3)
    return out


def _reset() -> None:
    """Forget the rows seen (tests; a forked child)."""
    _since.clear()
    _last[0] = _last[1] = 0.0
