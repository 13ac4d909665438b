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
