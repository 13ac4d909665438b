#!/usr/bin/env python3
"""The agent's direct reading of torch's allocator counters, on a real GPU.

    PYTHONPATH=agent python3 bench/direct_check.py [--results-dir DIR] [--name 15-direct]

In a process training the reference article's small MLP on cuda:0:
  found    the counters are found (gputop._direct) and the agent's source
           says "direct";
  exact    after every training step, memory read around a stats call must
           hold that call's counters word for word whenever it did not
           change during the call; the same from a second thread that
           checks every millisecond while training runs;
  torn     a thread copies the counters as fast as it can while training
           runs: copies with a peak below its current (torch updates the
           current first; the reader mends these) or with allocated above
           reserved are counted;
  follows  empty_cache() and a real out-of-memory error show in place as in
           the stats call;
  cost     one copy in place, one _cuda_memoryStats call,
           torch.cuda.memory_allocated(), and the agent's snapshot reading;
  async    a child with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
           whose allocator has no such counters, must stay on the stats call
           and say why.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import call_times_ns, quantile, setup_cpu, write_result  # noqa: E402


def timed(fn, n: int) -> float:
    """Median of n calls, in µs."""
    return quantile(call_times_ns(fn, n), 0.5) / 1e3


def async_child() -> str:
    """The reading a cudaMallocAsync process ends up with."""
    code = ("import torch; from gputop import _backend; x = torch.ones(1 << 20, device='cuda'); "
            "s = _backend.get(); s.maintain([0]); print(s.reading())")
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    return (p.stdout.strip().splitlines() or [p.stderr.strip()[-300:]])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default="direct")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=3.0, help="training beside each thread")
    a = ap.parse_args()

    import torch
    from torch import nn

    from gputop import _backend, _direct

    if not torch.cuda.is_available():
        write_result(a.results_dir, a.name, "SKIP", "no CUDA device")
        return 0
    step = setup_cpu(torch, nn)
    for _ in range(20):
        step()
    src = _backend.get()
    stats = torch._C._cuda_memoryStats
    t0 = time.perf_counter()
    src.maintain([0])
    found_ms = (time.perf_counter() - t0) * 1e3
    problems: list[str] = []
    r: dict = {"torch": torch.__version__, "reading": src.reading(), "found_ms": round(found_ms, 2)}
    print(f"torch {torch.__version__}: {r['reading']} after {found_ms:.2f} ms")
    d = src.direct
    if r["reading"] != "direct" or d is None:
        write_result(a.results_dir, a.name, "FAIL", f"not found: {r['reading']}", **r)
        return 1
    view = d.views[0]

    # exact: after each step, from the training thread
    tally = {True: 0, False: 0, None: 0}
    for _ in range(a.steps):
        step()
        tally[_direct.agrees(view.tobytes, lambda: stats(0))] += 1
    r["steps_agree"], r["steps_disagree"], r["steps_unstable"] = tally[True], tally[False], tally[None]

    # exact, from a second thread while training runs
    side = {True: 0, False: 0, None: 0}
    copies = {"n": 0, "torn_peak": 0, "over_reserved": 0}
    halt = threading.Event()

    def checker() -> None:
        while not halt.is_set():
            side[_direct.agrees(view.tobytes, lambda: stats(0), 3)] += 1
            time.sleep(0.001)

    def copier() -> None:
        pick = _direct._PICK
        while not halt.is_set():
            time.sleep(0.0001)  # gives the GIL back: training must run meanwhile
            for _ in range(200):
                raw = view.tobytes()
                al, ap_, rs, _rp, _i, _r, _o = pick.unpack(raw)
                copies["n"] += 1
                if ap_ < al:
                    copies["torn_peak"] += 1
                if al > rs:
                    copies["over_reserved"] += 1

    for target in (checker, copier):
        halt.clear()
        th = threading.Thread(target=target, daemon=True)
        th.start()
        end = time.perf_counter() + a.seconds
        n = 0
        while time.perf_counter() < end:
            step()
            n += 1
        halt.set()
        th.join()
        print(f"{target.__name__}: {n} steps beside it")
        r[f"steps_beside_{target.__name__}"] = n
    r["thread_agree"], r["thread_disagree"], r["thread_unstable"] = side[True], side[False], side[None]
    r.update({f"copies_{k}": v for k, v in copies.items()})

    # follows: empty_cache and a real OOM, in place as in the stats call
    torch.cuda.synchronize()
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    del big
    torch.cuda.empty_cache()
    after_empty = _direct.agrees(view.tobytes, lambda: stats(0))
    ooms0 = src.read(0).ooms
    try:
        torch.empty(2 * torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8,
                    device="cuda")
    except torch.OutOfMemoryError:
        pass
    c = src.read(0)
    r["follows"] = {"empty_cache_agrees": after_empty, "oom_counted": c.ooms == ooms0 + 1,
                    "oom_agrees": _direct.agrees(view.tobytes, lambda: stats(0))}

    # cost, in µs (median)
    r["cost_us"] = {
        "copy in place (tick)": timed(view.tobytes, 20000),
        "_cuda_memoryStats(0)": timed(lambda: stats(0), 5000),
        "memory_allocated()": timed(torch.cuda.memory_allocated, 2000),
        "snapshot reading (direct)": timed(lambda: src.read(0), 5000),
    }
    d.stop("timing the stats call")
    r["cost_us"]["snapshot reading (stats call)"] = timed(lambda: src.read(0), 5000)
    r["async"] = async_child()

    if tally[False] or side[False]:
        problems.append(f"disagreed with the stats call: {tally[False]} after steps, "
                        f"{side[False]} from the second thread")
    if tally[True] < a.steps // 2:
        problems.append(f"only {tally[True]}/{a.steps} checks after a step could tell")
    if r["steps_beside_copier"] < 100:
        problems.append(f"only {r['steps_beside_copier']} training steps ran beside the copying thread")
    if side[True] < 100:
        problems.append(f"only {side[True]} checks from the second thread could tell")
    if not all(v is True for v in r["follows"].values()):
        problems.append(f"empty_cache/OOM: {r['follows']}")
    if "cudaMallocAsync" not in r["async"] or not r["async"].startswith("stats call"):
        problems.append(f"cudaMallocAsync child: {r['async']}")

    print(f"\n{'check':34} result")
    print(f"{'after each step':34} {tally[True]} agree, {tally[False]} disagree, "
          f"{tally[None]} could not tell")
    print(f"{'second thread, every 1 ms':34} {side[True]} agree, {side[False]} disagree, "
          f"{side[None]} could not tell")
    print(f"{'copies while training':34} {copies['n']} beside {r['steps_beside_copier']} steps: "
          f"peak < current {copies['torn_peak']}, allocated > reserved {copies['over_reserved']}")
    print(f"{'empty_cache, OOM':34} {r['follows']}")
    print(f"{'cudaMallocAsync child':34} {r['async']}")
    for k, v in r["cost_us"].items():
        print(f"{k:34} {v:9.2f} µs")
    summary = (f"{r['reading']} on torch {torch.__version__} (found in {found_ms:.1f} ms); "
               f"{tally[True]}+{side[True]} checks agree word for word, "
               f"{tally[False] + side[False]} disagree; copy {r['cost_us']['copy in place (tick)']:.2f} µs "
               f"vs stats call {r['cost_us']['_cuda_memoryStats(0)']:.1f} µs; "
               f"torn peaks {copies['torn_peak']}/{copies['n']}")
    if problems:
        summary += "; " + "; ".join(problems)
    write_result(a.results_dir, a.name, "FAIL" if problems else "PASS", summary, **r)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
