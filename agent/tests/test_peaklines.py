"""The blocks live at each row's interval peak, by the line that
allocated them (wire.PeakLines), with allocation history on: on the fake
GPU, a step whose activations (two lines) and a temporary rise above what
is left at its row; the row names those lines with their bytes and
blocks, sent with the mark and shown by the real gputop; bounded to 8
lines, the rest counted; nothing without history; a snapshot too costly
for the time between rows is skipped and said so."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import TESTS, LineServer, child_env
from fakegpu import FakeGPU, MiB

import gputop
from gputop import _peaklines


def marks(server: LineServer) -> list[dict]:
    return [f for f in (json.loads(x) for x in server.lines()) if f["type"] == "mark"]


@pytest.fixture
def server(sock_path: str):
    s = LineServer(sock_path)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def fresh():
    _peaklines._reset()
    yield
    _peaklines._reset()


def _line(code: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.strip().startswith(code))


def _step(gpu: FakeGPU) -> int:
    act = [gpu.block(0, 8 * MiB) for _ in range(3)]  # activations
    tmp = gpu.block(0, 16 * MiB)  # a temporary
    for a in act:
        gpu.free_block(0, a)
    gpu.free_block(0, tmp)
    return gpu.block(0, 2 * MiB)  # the step's output, kept


def test_row_names_the_lines_live_at_its_peak(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=10_000)
    weights = gpu.block(0, 64 * MiB)  # weights
    gputop.snapshot("start")
    out = _step(gpu)
    gputop.snapshot("step 1")
    assert server.wait(lambda: len(marks(server)) == 2)
    first, row = marks(server)
    pl = row["devs"][0]["peak_lines"]
    f = __file__
    # the peak: weights, three activations and the temporary, before the frees
    assert pl["allocated"] == (64 + 3 * 8 + 16) * MiB
    assert first["t"] < pl["t"] < row["t"]
    got = [(x["file"], x["line"], x["func"], x["bytes"], x["blocks"]) for x in pl["lines"]]
    assert got == [
        (f, _line("weights = gpu.block"), "test_row_names_the_lines_live_at_its_peak", 64 * MiB, 1),
        (f, _line("act = [gpu.block"), "<listcomp>" if sys.version_info < (3, 12) else "_step", 24 * MiB, 3),
        (f, _line("tmp = gpu.block"), "_step", 16 * MiB, 1),
    ], got
    assert "skipped" not in pl and "more_lines" not in pl and "unknown" not in pl
    del out, weights


def test_more_lines_than_the_bound_are_summed(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=10_000)
    gputop.snapshot("start")
    # 12 allocating lines: code compiled under 12 file names
    held = [eval(compile(f"gpu.block(0, {i + 1} * MiB)", f"<line {i}>", "eval"), {"gpu": gpu, "MiB": MiB})
            for i in range(12)]
    gputop.snapshot("after")
    assert server.wait(lambda: len(marks(server)) == 2)
    pl = marks(server)[1]["devs"][0]["peak_lines"]
    assert len(pl["lines"]) == _peaklines.MAX_LINES == 8
    assert [x["bytes"] for x in pl["lines"]] == [(12 - i) * MiB for i in range(8)]
    assert pl["more_lines"] == 4 and pl["more"] == (1 + 2 + 3 + 4) * MiB
    del held


def test_no_history_no_lines(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach()
    gpu.block(0, MiB)
    gputop.snapshot("row")
    assert server.wait(lambda: len(marks(server)) == 1)
    assert "peak_lines" not in marks(server)[0]["devs"][0]
    assert gpu.memory.snapshots == 0


def test_a_costly_snapshot_is_skipped_and_said(server: LineServer, monkeypatch: pytest.MonkeyPatch):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=10_000)
    gpu.block(0, MiB)
    gputop.snapshot("one")
    # the last snapshot "took" 10 s: the next row within 200 s skips it
    monkeypatch.setattr(_peaklines, "_last", [time.perf_counter(), 10.0])
    gputop.snapshot("two")
    assert server.wait(lambda: len(marks(server)) == 2)
    pl = marks(server)[1]["devs"][0]["peak_lines"]
    assert pl["lines"] == [] and "took 10000 ms at the last row" in pl["skipped"]
    assert "200.0 s after it at the soonest" in pl["skipped"]
    assert gpu.memory.snapshots == 1


def test_gputop_records_the_lines(gputop_bin: str, tmp_path, sock_path: str):
    """The real `gputop record` takes the row's lines over the real socket
    (its checks pass them) and keeps them in the recording, whose replay
    the Go e2e test (TestPeakLinesShown) shows."""
    from test_e2e import Recorder, recording

    rec = Recorder(gputop_bin, tmp_path / "rec.gputop", sock_path, tmp_path / "rec.log")
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(TESTS)!r})
        from fakegpu import FakeGPU, MiB
        import gputop
        gpu = FakeGPU(1)
        gpu.install()
        gputop.attach(history=1000)
        t = time.time()
        while not gputop.status()["connected"] and time.time() - t < 10:
            time.sleep(0.02)
        gputop.snapshot("start")
        big = gpu.block(0, 40 * MiB)
        gpu.free_block(0, big)
        gputop.snapshot("step 1")
        time.sleep(0.3)
    """)
    try:
        p = subprocess.run([sys.executable, "-c", code], env=child_env(GPUTOP_SOCKET=sock_path),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        time.sleep(0.3)
    finally:
        rec.stop()
    rows = [f for f in recording(rec.rec) if f["type"] == "snapshot" and f["label"] == "step 1"]
    assert rows, "no row recorded"
    pl = rows[0]["peak_lines"]
    line = next(i for i, x in enumerate(code.splitlines(), 1) if "big = gpu.block" in x)
    assert pl["allocated"] == 40 * MiB and len(pl["lines"]) == 1, pl
    assert (pl["lines"][0]["file"], pl["lines"][0]["line"], pl["lines"][0]["bytes"]) == ("<string>", line, 40 * MiB), pl


def test_a_replay_past_its_bound_is_cut_and_said(monkeypatch: pytest.MonkeyPatch):
    # a history's state as torch's _snapshot() gives it: 10000 allocs and frees
    tr = []
    for k in range(5000):
        tr.append({"action": "alloc", "addr": k, "size": 512, "time_us": 2 * k + 1, "frames": []})
        tr.append({"action": "free_completed", "addr": k, "size": 512, "time_us": 2 * k + 2, "frames": []})
    state = {"segments": [], "device_traces": [tr]}
    assert _peaklines.lines(state, 0, 0, 1)["allocated"] == 512  # within the bound: one block at its highest
    monkeypatch.setattr(_peaklines, "LIMIT_S", -1.0)
    pl = _peaklines.lines(state, 0, 0, 1)
    assert pl["lines"] == [] and pl["skipped"] == "the history's trace was not replayed within -1000 ms (4096 entries of the interval)"
