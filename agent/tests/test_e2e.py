"""End to end: the real gputop binary (`gputop record --source agent`), the
real socket, a child Python process running the real gputop package over
the fake allocator; then `gputop export --csv` and the CSV checked to the
byte against what the child's snapshot() calls returned."""

from __future__ import annotations

import csv
import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS, child_env

MiB = 1 << 20


class Recorder:
    """`gputop record -o REC --source agent` listening on sock."""

    def __init__(self, binary: str, rec: Path, sock: str, log: Path) -> None:
        self.rec, self.sock, self.logpath = rec, sock, log
        self.log = open(log, "a")
        self.p = subprocess.Popen([binary, "record", "-o", str(rec), "--source", "agent"],
                                  env=dict(os.environ, GPUTOP_SOCKET=sock),
                                  stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                pytest.fail(f"gputop record exited with {self.p.returncode}:\n{log.read_text()}")
            try:
                if stat.S_ISSOCK(os.stat(sock).st_mode):
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        self.p.kill()
        pytest.fail(f"gputop record never created {sock}:\n{log.read_text()}")

    def stop(self) -> None:
        """Ctrl-C, as a user ends a recording."""
        self.p.send_signal(signal.SIGINT)
        try:
            rc = self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            pytest.fail(f"gputop record ignored SIGINT:\n{self.logpath.read_text()}")
        self.log.close()
        assert rc == 0, f"gputop record exited with {rc}:\n{self.logpath.read_text()}"

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.log.close()


class Child:
    """tests/child.py (or another script of tests/ that reads a command a
    line and answers in JSON): the training process, one command at a time."""

    def __init__(self, sock: str, log: Path, ndev: int = 1, script: str = "child.py", **env: str) -> None:
        self.err = open(log, "a")
        self.p = subprocess.Popen([sys.executable, str(TESTS / script)],
                                  env=child_env(GPUTOP_SOCKET=sock, FAKE_NDEV=str(ndev), **env),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  text=True, bufsize=1)
        self.logpath = log

    @property
    def pid(self) -> int:
        return self.p.pid

    def __call__(self, line: str, timeout: float = 20) -> Any:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        assert r, f"child gave no answer to {line!r}:\n{self.logpath.read_text()}"
        out = self.p.stdout.readline()
        assert out, f"child died at {line!r}:\n{self.logpath.read_text()}"
        return json.loads(out)

    def exit(self) -> None:
        self("exit")
        assert self.p.wait(15) == 0, self.logpath.read_text()
        self.err.close()

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()


@pytest.fixture
def e2e(gputop_bin: str, tmp_path: Path, sock_path: str):
    made: list[Any] = []

    class Env:
        bin = gputop_bin
        sock = sock_path
        dir = tmp_path

        def recorder(self, name: str = "rec.ndjson") -> Recorder:
            r = Recorder(gputop_bin, tmp_path / name, sock_path, tmp_path / (name + ".log"))
            made.append(r)
            return r

        def child(self, ndev: int = 1) -> Child:
            c = Child(sock_path, tmp_path / "child.log", ndev)
            made.append(c)
            return c

        def export(self, rec: Path) -> tuple[list[str], list[dict[str, str]]]:
            out = tmp_path / (rec.name + ".csv")
            r = subprocess.run([gputop_bin, "export", str(rec), "--csv", str(out)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, f"gputop export: {r.stdout}{r.stderr}"
            self.export_stdout = r.stdout
            with open(out, newline="") as f:
                rows = list(csv.reader(f))
            header = rows[0]
            return header, [dict(zip(header, row)) for row in rows[1:]]

    yield Env()
    for m in made:
        m.kill()


def recording(rec: Path) -> list[dict]:
    return [json.loads(x) for x in rec.read_text().splitlines() if x.strip()]


def agent_samples(rec: Path, pid: int) -> list[dict]:
    """pid's allocator samples in a recording, one dict each, as bench/rec.py
    reads them (the recorder writes them in batches)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import rec as recfile
    finally:
        sys.path.pop(0)
    r = recfile.load(str(rec))
    assert not r.errors, r.errors
    return r.samples_of(pid)


def check_rows(rows: list[dict[str, str]], label: str, values: dict[str, dict], pid: int) -> None:
    """The CSV rows of one snapshot equal, to the byte, what snapshot() returned."""
    mine = [r for r in rows if r["label"] == label]
    assert len(mine) == len(values), f"{label!r}: want {len(values)} rows, CSV has {mine}"
    for r in mine:
        assert r["pid"] == str(pid) and r["source"] == "agent"
    got = sorted((int(r["allocated_bytes"]), int(r["reserved_bytes"]), int(r["peak_bytes"])) for r in mine)
    want = sorted((v["allocated"], v["reserved"], v["peak"]) for v in values.values())
    assert got == want, f"{label!r}"
    for r in mine:
        for col, bcol in (("allocated_mb", "allocated_bytes"), ("reserved_mb", "reserved_bytes"),
                          ("peak_mb", "peak_bytes")):
            assert abs(float(r[col]) - int(r[bcol]) / MiB) <= 0.006, (label, col, r)


def test_snapshots_reach_the_csv_to_the_byte(e2e):
    rec = e2e.recorder()
    c = e2e.child(ndev=2)
    c("attach 100")
    assert c("wait_connects 1 10")["ok"]
    snaps: dict[str, dict] = {}
    c("alloc 0 262144")
    snaps["Training start"] = c("snap Training start")["values"]
    c("alloc 0 12939428")
    c("alloc 1 5000000")
    snaps["Epoch 5"] = c("snap Epoch 5")["values"]
    row = c("tsnap Epoch 10")["row"]  # Tracker: this device only
    snaps["Epoch 10"] = {"0": {"allocated": row["allocated_bytes"], "reserved": row["reserved_bytes"],
                               "peak": row["peak_bytes"]}}
    c("phase eval")  # allocates 1 MiB inside the phase
    c("free 0 1048576")
    c("free 0 12939428")
    c("free 1 5000000")
    snaps["Training end"] = c("snap Training end")["values"]
    cl = c("cleanup")
    snaps["Before cleanup"], snaps["After cleanup"] = cl["before"], cl["after"]
    assert c("wait_samples 20 10")["ok"]
    pid = c.pid
    c.exit()
    time.sleep(0.3)  # let gputop read the bye
    rec.stop()

    header, rows = e2e.export(rec.rec)
    assert header[:7] == ["label", "time", "device", "allocated_mb", "reserved_mb", "peak_mb", "nvml_used_mb"]
    assert {"allocated_bytes", "reserved_bytes", "peak_bytes"} <= set(header)
    for label, values in snaps.items():
        check_rows(rows, label, values, pid)
    assert snaps["After cleanup"]["0"]["allocated"] == snaps["Training start"]["0"]["allocated"]
    labels = [r["label"] for r in rows]
    assert "eval (start)" in labels and "eval (end)" in labels
    # the recording holds the process's hello, its samples and a clean bye
    lines = recording(rec.rec)
    hello = [f for f in lines if f["type"] == "hello" and f["pid"] == pid]
    assert hello and [d["uuid"] for d in hello[0]["devices"]] == [
        "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b", "GPU-d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"]
    assert len(agent_samples(rec.rec, pid)) >= 20
    assert not [f for f in lines if f["type"] == "sample"], "samples are written in batches"
    assert [f for f in lines if f["type"] == "bye" and f.get("pid") == pid]
    assert not [f for f in lines if f["type"] == "ended" and f.get("pid") == pid]


def test_gputop_started_after_the_agent(e2e):
    c = e2e.child()
    c("attach 100")
    c("alloc 0 3000000")
    early = c("snap early")["values"]  # nobody listening yet: queued
    time.sleep(0.3)
    assert c("status")["connected"] is False
    rec = e2e.recorder()
    assert c("wait_connects 1 10")["ok"], "the agent did not find gputop once it started"
    c("alloc 0 1000000")
    late = c("snap late")["values"]
    pid = c.pid
    c.exit()
    time.sleep(0.3)
    rec.stop()
    _, rows = e2e.export(rec.rec)
    check_rows(rows, "early", early, pid)
    check_rows(rows, "late", late, pid)


def test_gputop_restarted_mid_run(e2e):
    rec1 = e2e.recorder("one.ndjson")
    c = e2e.child()
    c("attach 100")
    assert c("wait_connects 1 10")["ok"]
    c("alloc 0 4000000")
    first = c("snap first")["values"]
    time.sleep(0.3)
    rec1.stop()
    rec2 = e2e.recorder("two.ndjson")
    st = c("wait_connects 2 10")
    assert st["ok"], f"no reconnect after gputop restarted: {st['status']}"
    c("alloc 0 4000000")
    second = c("snap second")["values"]
    assert c("wait_samples 5 10")["ok"]
    pid = c.pid
    c.exit()
    time.sleep(0.3)
    rec2.stop()
    _, rows1 = e2e.export(rec1.rec)
    _, rows2 = e2e.export(rec2.rec)
    check_rows(rows1, "first", first, pid)
    check_rows(rows2, "second", second, pid)
    assert "second" not in [r["label"] for r in rows1]
    # the second gputop heard a fresh hello before anything else from this pid
    own = [f for f in recording(rec2.rec) if f.get("pid") == pid]
    assert own[0]["type"] == "hello"


def test_training_process_killed_mid_run(e2e):
    rec = e2e.recorder()
    c = e2e.child()
    c("attach 200")
    assert c("wait_connects 1 10")["ok"]
    c("alloc 0 9000000")
    before = c("snap before kill")["values"]
    st = c("wait_samples 30 10")
    assert st["ok"]
    pid = c.pid
    time.sleep(0.2)  # the mark and samples are on the socket by now
    os.kill(pid, signal.SIGKILL)
    c.p.wait(10)
    time.sleep(0.5)  # gputop reads EOF
    rec.stop()
    lines = recording(rec.rec)
    samples = agent_samples(rec.rec, pid)
    assert len(samples) >= 30, "the killed process's samples must stay in the recording"
    assert all(s["allocated"] == 9000000 for s in samples[-5:])
    ended = [f for f in lines if f["type"] == "ended" and f.get("pid") == pid]
    assert len(ended) == 1, f"want one ended frame for pid {pid}"
    assert not [f for f in lines if f["type"] == "bye" and f.get("pid") == pid]
    _, rows = e2e.export(rec.rec)
    check_rows(rows, "before kill", before, pid)


def test_oom_reaches_the_recording(e2e):
    rec = e2e.recorder()
    c = e2e.child()
    c("attach 100")
    assert c("wait_connects 1 10")["ok"]
    c("alloc 0 7340032")
    c("oom 0 1099511627776")
    time.sleep(0.3)
    pid = c.pid
    c.exit()
    time.sleep(0.3)
    rec.stop()
    ooms = [f for f in recording(rec.rec) if f["type"] == "oom" and f.get("pid") == pid]
    assert len(ooms) == 1
    assert (ooms[0]["requested"], ooms[0]["allocated"], ooms[0]["reserved"]) == (1 << 40, 7340032, 8 * MiB)
    _, rows = e2e.export(rec.rec)
    oom_rows = [r for r in rows if r["label"] == "OOM"]
    assert len(oom_rows) == 1 and oom_rows[0]["allocated_bytes"] == "7340032"
    # what the row alone cannot say: the size asked for, the free memory torch saw
    assert (oom_rows[0]["oom_requested_bytes"], oom_rows[0]["oom_free_bytes"]) == (str(1 << 40), str(MiB))
    assert all(r["oom_requested_bytes"] == "" for r in rows if r["label"] != "OOM")
    # and export says what happened, for a recording no screen has shown
    said = " ".join(e2e.export_stdout.split())
    assert "✗ OOM at" in said and f"in pid {pid}: asked for 1024.0 GiB, 1.0 MiB free on the GPU (CUDA)." in said, said
