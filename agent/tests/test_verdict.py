"""The answer after cleanup, end to end: real gputop (`record`, `export`,
`snap`, the replayed TUI in tmux), the real socket, and training processes
running the real agent over the fake allocator (verdict_child.py), whose
end rows walk their holders for real (CPU tensors stand for CUDA ones).
Each case the verdict must get right, as a user meets it."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, Tmux, child_env
from test_e2e import Recorder

MiB = 1 << 20


class Proc:
    """verdict_child.py running one scenario."""

    def __init__(self, scenario: str, sock: str, log: Path, stay: bool = True) -> None:
        self.log = open(log, "a")
        self.p = subprocess.Popen([sys.executable, str(TESTS / "verdict_child.py"), scenario]
                                  + ([] if stay else ["exit"]),
                                  env=child_env(GPUTOP_SOCKET=sock, GPUTOP_HOLDERS_DEVICE="cpu"),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        assert line, f"{scenario} died:\n{log.read_text()}"
        self.out: dict[str, Any] = json.loads(line)
        assert self.p.stdout.readline().strip() == "ready"

    @property
    def pid(self) -> int:
        return self.out["pid"]

    def end(self) -> None:
        """Let it exit (its agent says bye)."""
        if self.p.poll() is None:
            assert self.p.stdin is not None
            self.p.stdin.close()
            self.p.wait(15)
        self.log.close()


@pytest.fixture
def run(gputop_bin: str, tmp_path: Path, sock_path: str):
    """A recording of the given scenarios (all at once, one GPU), exported."""
    made: list[Any] = []

    class Run:
        dir = tmp_path
        rec = tmp_path / "run.gputop"

        def __init__(self) -> None:
            self.recorder = Recorder(gputop_bin, self.rec, sock_path, tmp_path / "record.log")
            made.append(self.recorder)

        def proc(self, scenario: str, stay: bool = True) -> Proc:
            p = Proc(scenario, sock_path, tmp_path / f"{scenario}.log", stay)
            made.append(p)
            return p

        def snap(self, label: str) -> None:
            r = subprocess.run([gputop_bin, "snap", label, "--socket", sock_path],
                               capture_output=True, text=True, timeout=20)
            assert r.returncode == 0, r.stdout + r.stderr

        def finish(self) -> tuple[str, list[dict[str, str]]]:
            for m in made:
                if isinstance(m, Proc):
                    m.end()
            time.sleep(0.3)
            self.recorder.stop()
            out = tmp_path / "run.csv"
            r = subprocess.run([gputop_bin, "export", str(self.rec), "--csv", str(out)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            with open(out, newline="") as f:
                rows = list(csv.DictReader(f))
            return r.stdout, rows

    yield Run()
    for m in made:
        if isinstance(m, Proc):
            if m.p.poll() is None:
                m.p.kill()
        else:
            m.kill()


def verdicts(text: str, pid: int) -> list[str]:
    return [line.split(": ", 1)[1] for line in text.splitlines() if f", pid {pid}: " in line]


def test_workspaces_after_the_articles_cleanup_are_no_leak(run):
    p = run.proc("article")
    text, rows = run.finish()
    v = verdicts(text, p.pid)
    # the article's own cleanup leaves the workspaces: named, and a pass
    assert "✓ After cleanup: nothing of yours holds CUDA memory (65.0 MiB cuBLAS workspaces, " \
           "not a leak: gputop.cleanup() frees them) [holders walk]" in v, text
    assert p.out["article"]["internal"] == 65 * MiB and p.out["article"]["workspaces"] == 3
    assert p.out["article"]["python"] == 0 and p.out["article"]["unaccounted"] == 0
    # gputop.cleanup() frees them, and says which step did
    ws = [s for s in p.out["steps"] if s["step"] == "cuBLAS workspaces"]
    assert ws and ws[0]["released_allocated_bytes"] == 65 * MiB and p.out["after"] == 0
    assert v.count("✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated) [holders walk]") == 1, text
    # Training end: the model and the workspaces, each named
    assert any(x.startswith("✗ Training end: 12.0 MiB still held: ") and "65.0 MiB cuBLAS workspaces" in x
               for x in v), text
    # the CSV's verdict columns
    ac = [r for r in rows if r["label"] == "After cleanup"]
    assert [(r["verdict"], r["held_python_bytes"], r["held_torch_internal_bytes"], r["held_unaccounted_bytes"])
            for r in ac] == [("released", "0", str(65 * MiB), "0"), ("released", "0", "0", "0")]
    assert all(r["verdict"] == "" for r in rows if r["label"] in ("Training start", "Before cleanup"))


def test_deleted_model_with_kept_tensors_is_a_leak_naming_them(run, gputop_bin: str):
    p = run.proc("kept")
    text, rows = run.finish()
    v = verdicts(text, p.pid)
    # under the baseline (taken with the model on the GPU), and still a leak
    assert any(x.startswith("✗ After cleanup: 100.0 MiB still held: kept (1 tensor float32[26214400])")
               for x in v), text
    assert '  vs "Training start": -300.00 MiB allocated (torch)' in text.splitlines(), text
    r = next(r for r in rows if r["label"] == "After cleanup")
    assert r["verdict"] == "held" and r["top_holder"] == "kept" and r["held_python_bytes"] == str(100 * MiB)
    assert "kept" in r["verdict_text"]
    # a row after the end row: export still gives its verdict (above), and
    # so does the screen at the end of the replay
    assert any(r["label"] == "Epoch 1" for r in rows)
    screen = replay_screen(gputop_bin, run.rec, run.dir)
    flat = " ".join(screen.split())
    assert "Epoch 1" in screen and "✗ After cleanup: 100.0 MiB still held: kept" in flat, screen


def test_two_processes_on_one_gpu_keep_their_own_deltas_and_verdicts(run, gputop_bin: str):
    a = run.proc("article")
    b = run.proc("kept")
    text, rows = run.finish()
    assert any("✓ After cleanup: nothing of yours" in x for x in verdicts(text, a.pid)), text
    assert any("✗ After cleanup: 100.0 MiB still held: kept" in x for x in verdicts(text, b.pid)), text
    # each process's After cleanup delta is against its own previous row
    mine = {r["pid"]: r for r in rows if r["label"] == "After cleanup" and r["source"] == "agent"
            and r["verdict"] != "" and r["held_torch_internal_bytes"] != "0"}
    assert mine[str(a.pid)]["delta_allocated_mb"] == "-12.00", rows
    kept = next(r for r in rows if r["label"] == "After cleanup" and r["pid"] == str(b.pid))
    assert kept["delta_allocated_mb"] == "-300.00", rows
    # the screen says whose each row is
    screen = replay_screen(gputop_bin, run.rec, run.dir)
    assert "PID" in screen and str(a.pid) in screen and str(b.pid) in screen, screen
    flat = " ".join(screen.split())
    assert f"pid {b.pid}, After cleanup: 100.0 MiB still held: kept" in flat, screen


def test_a_walk_that_cannot_finish_says_so(run):
    hostile = run.proc("raising")
    slow = run.proc("slow")
    off = run.proc("off")
    text, _ = run.finish()
    # objects whose attributes raise: skipped, the verdict still given
    assert any(x.startswith("✗ After cleanup: 8.0 MiB still held: kept") for x in verdicts(text, hostile.pid)), text
    # past the time limit: could not tell, never a ✓
    v = verdicts(text, slow.pid)
    assert any(x.startswith("? After cleanup: could not tell what holds 8.0 MiB: the holders walk took longer "
                            "than its 0.0 s limit") for x in v), text
    assert slow.out["held"]["skipped"]
    v = verdicts(text, off.pid)
    assert any("could not tell what holds 8.0 MiB: the holders walk was turned off for this row (verdict=False)" in x
               for x in v), text


def test_end_row_from_the_shell_asks_the_agent_or_says_why_not(run):
    dies = run.proc("dies_in_walk")
    kept = run.proc("kept")
    # from the shell: each agent process is asked for a walk; one dies in it
    run.snap("After cleanup")
    deadline = time.monotonic() + 15
    while dies.p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert dies.p.returncode == 3
    time.sleep(0.5)  # the other's answer
    kept.end()
    time.sleep(0.3)
    # no agent left: the row of no process says what gputop cannot tell
    run.snap("cleanup")
    text, rows = run.finish()
    assert any("? After cleanup: could not tell what holds 8.0 MiB: the process ended before its holders walk answered"
               in x for x in verdicts(text, dies.pid)), text
    got = verdicts(text, kept.pid)
    assert sum(x.startswith("✗ After cleanup: 100.0 MiB still held: kept") for x in got) == 2, text
    assert "? cleanup: no agent, and NVML's process list of that moment is not known" in text, text
    shell = [r for r in rows if r["source"] == "cli" and r["label"] == "After cleanup"]
    assert {r["pid"] for r in shell} == {str(dies.pid), str(kept.pid)}


def replay_screen(gputop_bin: str, rec: Path, tmp: Path) -> str:
    """The replayed TUI at 160x50, at the end of the recording."""
    if not shutil.which("tmux"):
        if os.environ.get("CI"):
            raise RuntimeError("tmux is needed for the terminal tests")
        pytest.skip("tmux not installed")
    term = Tmux([gputop_bin, "--replay", str(rec)])
    try:
        deadline = time.monotonic() + 15
        scr = ""
        while time.monotonic() < deadline:
            term.keys("End")
            time.sleep(0.3)
            scr = term.screen()
            at = re.search(r"cursor (\S+) / (\S+)", scr)  # the title: at the end once both agree
            if at and at.group(1) == at.group(2) and "After cleanup" in scr:
                return scr
        return scr
    finally:
        term.close()
