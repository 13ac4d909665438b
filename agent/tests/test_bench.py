"""The benchmark tools that CI can run without a GPU: they must measure what
they say, here against the real binary and a pretend allocator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import TESTS

REPO = Path(TESTS).parents[1]


def test_agent_tick_times_every_wakeup(gputop_bin: str, tmp_path: Path) -> None:
    out = tmp_path / "tick.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    env.pop("GPUTOP_SOCKET", None)
    p = subprocess.run([sys.executable, str(REPO / "bench" / "agent_tick.py"), "--gputop", gputop_bin,
                        "--fake", "--seconds", "1.5", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    # 100 Hz for 1.5 s: one timed span per wake-up, the samples reached gputop
    assert 100 <= r["wakeups"] <= 200, r
    assert r["samples_sent"] >= 100, r
    assert 0 < r["span_median_us"] <= r["span_p90_us"], r
    assert 0 < r["gil_held_pct"] < 100, r
    assert "GIL held median" in p.stdout


def test_overhead_analysis_of_a_real_h200_run(tmp_path: Path, capsys) -> None:
    # the raw segments of the 05:44 H200 run, analysed again: the figures
    # BENCHMARKS.md quotes must come out of them
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import overhead
    finally:
        sys.path.pop(0)
    res = json.loads((REPO / "bench" / "results" / "2026-11-30-overhead-toggle.json").read_text())
    a = overhead.argparse.Namespace(results_dir=str(tmp_path / "res"), prefix="40-", skip=[],
                                    gputop=None, seg_cpu=1.0, seg_gpu=2.0, seg_toggle=0.25)
    overhead.analyse(a, res)
    cpu = json.loads((tmp_path / "res" / "40-overhead-cpu.json").read_text())
    assert cpu["status"] == "PASS"
    assert cpu["toggle_pairs"] == 100
    assert round(cpu["toggle_slowdown_pct"], 2) == -0.03
    assert round(cpu["toggle_slowdown_pct_mean"], 2) == 0.37
    assert round(cpu["toggle_slowdown_pct_sem"], 2) == 0.83
    assert round(cpu["toggle_train_asleep_added_pts"], 2) == 0.86
    gpu = json.loads((tmp_path / "res" / "40-overhead-gpu.json").read_text())
    assert round(gpu["agent_slowdown_pct"], 2) == -0.71
    assert "asleep (CUDA syncs, GIL waits)" in capsys.readouterr().out
