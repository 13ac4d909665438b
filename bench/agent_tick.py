#!/usr/bin/env python3
"""How long the agent thread holds the GIL per wake-up, in a real agent
thread streaming to a real `gputop record`.

    PYTHONPATH=agent python3 bench/agent_tick.py --gputop bin/gputop [--bare] [--fake]

The agent thread gives the GIL up only while it waits in poll() (and in its
socket writes). So the time from poll() returning to the next poll() call is
the time it holds the GIL, which a training thread of the same process
cannot have; this wraps select.poll to time exactly that, over --seconds.
Also reports the agent thread's CPU time (schedstat), which includes the
kernel's cost of waking it.

--bare then times a bare thread that makes the same stats call at the same
rate and does nothing else: what any sampler costs, against which the
agent's own work shows.

--fake reads a pretend allocator (stats built in Python, shaped like
torch._C._cuda_memoryStats) instead of CUDA's, for machines without a GPU:
the stats call then costs about what torch's does cold, but not exactly.
The main thread sleeps meanwhile: with a thread running Python beside it,
the span would also hold the agent's waits to get the GIL back.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import select
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Bare, start_gputop, stop_proc, thread_cpu_ns  # noqa: E402

_real_poll = select.poll
SPANS: list[int] = []  # ns from poll() returning to the next poll() call


class _TimedPoll:
    """select.poll, noting how long the calling thread ran between waits."""

    def __init__(self) -> None:
        self._p = _real_poll()
        self._back: int | None = None

    def register(self, *a):
        return self._p.register(*a)

    def unregister(self, *a):
        return self._p.unregister(*a)

    def modify(self, *a):
        return self._p.modify(*a)

    def poll(self, *a):
        t = time.perf_counter_ns()
        if self._back is not None:
            SPANS.append(t - self._back)
        try:
            return self._p.poll(*a)
        finally:
            self._back = time.perf_counter_ns()


def fake_stats():
    """A pretend _cuda_memoryStats: nested dicts, a new one per call."""
    n = [0]

    def stat(cur: int, peak: int) -> dict:
        return {"all": {"current": cur, "peak": peak, "allocated": 0, "freed": 0},
                "small_pool": {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
                "large_pool": {"current": cur, "peak": peak, "allocated": 0, "freed": 0}}

    def stats(i: int) -> dict:
        n[0] += 1
        return {"allocated_bytes": stat(n[0] * 512, 1 << 30), "reserved_bytes": stat(1 << 30, 1 << 30),
                "inactive_split_bytes": stat(0, 0), "active_bytes": stat(n[0] * 512, 1 << 30),
                "num_alloc_retries": 0, "num_ooms": 0}
    return stats


def pretend_backend(stats):
    """One pretend device read through stats, as torch's backend reads one
    (the stats call, its counters picked out at send time)."""
    from gputop import _backend, _torch

    class Pretend(_backend.Backend):
        counters = staticmethod(_torch.counters)

        def available(self, import_module=True):
            return True

        def devices(self):
            return [0]

        def info(self, index):
            return {"index": 0, "uuid": "GPU-00000000-0000-4000-8000-000000000000",
                    "name": "pretend", "total": 1 << 34}

        def read_raw(self, index):
            return stats(index)

    return Pretend()


def timed(tid: int, seconds: float) -> tuple[list[int], float, int]:
    """(sorted GIL-held spans, wall seconds, thread CPU ns) of thread tid
    over seconds, while this thread sleeps."""
    SPANS.clear()
    c0, t0 = thread_cpu_ns(tid), time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    cpu = (thread_cpu_ns(tid) or 0) - (c0 or 0)
    return sorted(SPANS), wall, cpu


def figures(spans: list[int], wall: float, cpu: int) -> dict:
    return {
        "seconds": round(wall, 2),
        "wakeups": len(spans),
        "span_median_us": round(spans[len(spans) // 2] / 1e3, 1),
        "span_p90_us": round(spans[int(len(spans) * 0.9)] / 1e3, 1),
        "span_mean_us": round(statistics.fmean(spans) / 1e3, 1),
        "gil_held_pct": round(sum(spans) / 1e9 / wall * 100, 3),
        "thread_cpu_pct": round(cpu / 1e9 / wall * 100, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fake", action="store_true", help="a pretend allocator instead of CUDA's")
    ap.add_argument("--bare", action="store_true",
                    help="then time a bare thread making the same stats call at the same rate, "
                         "the floor the agent's tick is measured against")
    ap.add_argument("--out")
    a = ap.parse_args()

    select.poll = _TimedPoll  # before the agent thread makes its poller
    import gputop
    from gputop import _agent, _backend

    keep = None
    if a.fake:
        _backend.install(pretend_backend(fake_stats()))
    else:
        import torch
        if not torch.cuda.is_available():
            print("agent_tick.py: CUDA is not available (use --fake)", file=sys.stderr)
            return 2
        keep = torch.ones(1 << 20, device="cuda")  # CUDA initialised, something allocated

    work = tempfile.mkdtemp(prefix="gputop-tick.")
    sock = os.path.join(work, "gputop.sock")
    with open(os.path.join(work, "record.log"), "w") as log:
        rec = start_gputop(a.gputop, os.path.join(work, "tick.gputop"), sock, "agent", log)
    if rec is None:
        print(f"agent_tick.py: gputop record did not start (see {work}/record.log)", file=sys.stderr)
        return 1
    try:
        ag = gputop.attach(socket=sock)
        time.sleep(1.0)  # connect, hello, the first batches
        spans, wall, cpu = timed(ag._thread.native_id, a.seconds)
        st = gputop.status()
        gputop.detach()
    finally:
        stop_proc(rec)
    if not spans or not st.get("connected"):
        print(f"agent_tick.py: no ticks timed (agent status: {st})", file=sys.stderr)
        return 1
    source = "pretend allocator" if a.fake else "CUDA"
    res = {"source": source, "samples_sent": st.get("samples_sent"), **figures(spans, wall, cpu)}
    print(f"agent tick ({source}, {res['wakeups']} wake-ups "
          f"in {res['seconds']} s): GIL held median {res['span_median_us']} us, p90 "
          f"{res['span_p90_us']} us, mean {res['span_mean_us']} us = {res['gil_held_pct']}% of the "
          f"time; agent thread CPU {res['thread_cpu_pct']}% of a core")
    if a.bare:
        # the same stats call, from a thread that does nothing else
        if a.fake:
            fn = functools.partial(_backend.get().read_raw, 0)
        else:
            fn = functools.partial(torch._C._cuda_memoryStats, torch.cuda.current_device())
        bare = Bare(_agent.DEFAULT_RATE_HZ, fn)
        bare.start()
        time.sleep(0.3)
        spans, wall, cpu = timed(bare.native_id, a.seconds)
        bare.halt.set()
        bare.join()
        b = res["bare"] = figures(spans, wall, cpu)
        print(f"bare thread ({source}, poll + the stats call, {b['wakeups']} wake-ups in "
              f"{b['seconds']} s): GIL held median {b['span_median_us']} us, p90 {b['span_p90_us']} us, "
              f"mean {b['span_mean_us']} us = {b['gil_held_pct']}% of the time; its CPU "
              f"{b['thread_cpu_pct']}% of a core")
    del keep
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
