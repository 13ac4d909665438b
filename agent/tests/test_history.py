"""Allocation history and memory dumps with the fake GPU (its FakeMemory
stands for torch.cuda.memory): turned on when asked, labelled, dumped at
an OOM before the observer returns and at a labelled snapshot by the agent
thread, bounded, never replacing a file, and every failure reported, never
raised. The dumps are read back with pickle and with the real `gputop
dump-info`."""

from __future__ import annotations

import csv
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import TESTS, LineServer, child_env
from fakegpu import FakeGPU, MiB

import gputop
from gputop import _dumps, _history


def frames(lines: list[bytes]) -> list[dict]:
    return [json.loads(x) for x in lines]


def of_type(lines: list[bytes], typ: str) -> list[dict]:
    return [f for f in frames(lines) if f["type"] == typ]


@pytest.fixture
def server(sock_path: str):
    s = LineServer(sock_path)
    yield s
    s.close()


@pytest.fixture
def dump_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    d = str(tmp_path / "dumps")
    monkeypatch.setenv("GPUTOP_DUMP_DIR", d)
    return d


def hellos(server: LineServer) -> list[dict]:
    return of_type(server.lines(), "hello")


def test_history_off_by_default(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach()
    assert server.wait(lambda: hellos(server))
    assert gpu.memory.calls == []
    assert "history" not in hellos(server)[-1]
    assert gputop.status()["history"] == {"max_entries": 0, "asked": 0}


def test_attach_history_turns_it_on_with_python_stacks(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=100_000)
    assert gpu.memory.calls == [{"enabled": "all", "context": "all", "stacks": "python", "max_entries": 100_000}]
    assert server.wait(lambda: hellos(server) and hellos(server)[-1].get("history") == 100_000)
    gputop.attach(history=100_000)  # asked twice: nothing changes, and it says so
    assert len(gpu.memory.calls) == 1
    assert "already asked for" in gputop.status()["history"]["note"]
    gputop.attach(history=500)
    assert gpu.memory.calls[-1]["max_entries"] == 500
    assert "changed from 100000 to 500" in gputop.status()["history"]["note"]
    gputop.attach(history=0)
    assert gpu.memory.calls[-1]["enabled"] is None
    assert server.wait(lambda: "history" not in hellos(server)[-1])


def test_env_history_waits_for_cuda(server: LineServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUTOP_HISTORY", "2000")
    devs: list[dict] = []
    gpu = FakeGPU(1)
    gpu.devices = lambda: devs  # type: ignore[method-assign]
    gpu.install()
    gputop.attach()
    assert server.wait(lambda: hellos(server))
    assert gpu.memory.calls == [] and gputop.status()["history"]["asked"] == 2000
    devs.append({"index": 0, "uuid": "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b", "name": "Fake", "total": 1 << 30})
    # the agent thread turns it on when it sees the device, and says so
    assert server.wait(lambda: hellos(server)[-1].get("history") == 2000)
    assert gpu.memory.calls[0]["max_entries"] == 2000


@pytest.mark.parametrize("gpu_kw, want", [
    ({"backend": "cudaMallocAsync"}, "cudaMallocAsync allocator backend records no allocation history"),
    ({"history": False}, "this torch has no torch.cuda.memory._record_memory_history"),
])
def test_history_unsupported_is_said_not_raised(server: LineServer, gpu_kw: dict, want: str):
    gpu = FakeGPU(1, **gpu_kw)
    gpu.install()
    gputop.attach(history=1000)
    assert want in gputop.status()["history"]["error"]
    assert server.wait(lambda: hellos(server) and want in hellos(server)[-1].get("history_error", ""))
    assert "history" not in hellos(server)[-1]
    gputop.snapshot("Epoch 1")  # labels and snapshots carry on
    gpu.oom(0, 1 << 40)  # no dump without history
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    assert "dump" not in of_type(server.lines(), "oom")[0]


def test_bad_history_value(server: LineServer):
    FakeGPU(1).install()
    gputop.attach(history="lots")  # type: ignore[arg-type]
    assert "'lots' is not a number of entries" in gputop.status()["history"]["error"]


def test_labels_follow_snapshots_and_phases(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    gputop.snapshot("Epoch 1")
    gpu.block(0, MiB)
    with gputop.phase("eval"):
        gpu.block(0, MiB)
    gpu.block(0, MiB)
    assert [e["user_metadata"] for e in gpu.memory.traces[0]] == ["Epoch 1", "eval", "Epoch 1"]


def _grow(gpu: FakeGPU, losses: list, n: int) -> None:
    for _ in range(n):
        losses.append(gpu.block(0, 3 * MiB))  # the line a dump must name


GROW_LINE = "losses.append(gpu.block(0, 3 * MiB))"


def _line_of(code: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if code in line and "GROW_LINE" not in line)


def test_labelled_dump_names_the_growing_line(server: LineServer, dump_dir: str, gputop_bin: str):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    losses: list = []
    gputop.snapshot("Epoch 1")
    _grow(gpu, losses, 10)
    gputop.snapshot("Epoch 2", dump=True)
    gputop.snapshot("after")  # its mark comes after the dump's
    assert server.wait(lambda: len(of_type(server.lines(), "mark")) == 3)
    marks = of_type(server.lines(), "mark")
    assert [m["label"] for m in marks] == ["Epoch 1", "Epoch 2", "after"]
    d = marks[1]["dump"]
    assert "dump" not in marks[0] and "dump" not in marks[2]
    assert os.path.dirname(d["path"]) == dump_dir
    assert os.path.basename(d["path"]).startswith(f"{os.getpid()}-Epoch_2-")
    assert d["bytes"] == os.path.getsize(d["path"]) and d["took_ms"] >= d["gil_ms"] > 0
    assert os.stat(d["path"]).st_mode & 0o777 == 0o600
    assert [f for f in os.listdir(dump_dir)] == [os.path.basename(d["path"])]  # no temporary left
    with open(d["path"], "rb") as f:
        snap = pickle.load(f)
    assert len(snap["segments"]) == 10 and len(snap["device_traces"][0]) == 10
    # gputop reads it: the growing line on top, with the label it grew under
    out = subprocess.run([gputop_bin, "dump-info", d["path"]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    top = lines[lines.index(next(x for x in lines if "bytes  blocks  frame" in x)) + 1]
    assert f"test_history.py:{_line_of(GROW_LINE)} _grow" in top and " 10  " in top and "[Epoch 1]" in top
    assert gputop.status()["dumps"]["written"] == [d["path"]]


def test_oom_dump_is_written_before_the_observer_returns(server: LineServer, dump_dir: str, gputop_bin: str):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    hold = [gpu.block(0, 8 * MiB) for _ in range(3)]
    assert server.wait(lambda: hellos(server))
    gpu.oom(0, 1 << 40)  # torch calls the observer, then raises
    names = os.listdir(dump_dir)
    assert len(names) == 1 and names[0].startswith(f"{os.getpid()}-OOM-")  # on disk already
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    o = of_type(server.lines(), "oom")[0]
    assert o["dump"]["path"] == os.path.join(dump_dir, names[0])
    out = subprocess.run([gputop_bin, "dump-info", o["dump"]["path"]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "out of memory: 1024.0 GiB asked for at" in out.stdout
    assert "test_history.py" in out.stdout and len(hold) == 3


def test_what_the_snapshot_would_import_is_imported_first_as_a_phase_of_its_own(
        server: LineServer, dump_dir: str, tmp_path, monkeypatch: pytest.MonkeyPatch):
    """torch 2.11's first snapshot with stacks imports torch._inductor: the
    OOM's dump imports it first, in the failing thread, and says so."""
    (tmp_path / "slow_inductor_stand_in.py").write_text("import time\ntime.sleep(0.3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_inductor_stand_in", raising=False)
    gpu = FakeGPU(1)
    backend = gpu.install()
    backend.snapshot_modules = ("slow_inductor_stand_in",)
    gputop.attach(history=1000)
    hold = gpu.block(0, 8 * MiB)
    assert server.wait(lambda: hellos(server))
    gpu.oom(0, 1 << 40)
    assert "slow_inductor_stand_in" in sys.modules, "imported in the failing thread, before the snapshot"
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    d = of_type(server.lines(), "oom")[0]["dump"]
    ph = d["phases"]
    assert ph["import_ms"] >= 300 and ph["take_ms"] < ph["import_ms"], ph
    assert d["took_ms"] >= ph["import_ms"] and d["gil_ms"] < 300, "the import slept: wall time, not the GIL's"
    gpu.oom(0, 1 << 40)  # imported now: the next dump has no such phase
    assert server.wait(lambda: len(of_type(server.lines(), "oom")) == 2)
    assert "import_ms" not in of_type(server.lines(), "oom")[1]["dump"]["phases"] and hold


def test_dumps_are_bounded_oldest_removed(server: LineServer, dump_dir: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUTOP_DUMP_MAX", "2")
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    gpu.block(0, MiB)
    for i in range(3):
        gputop.snapshot(f"s{i}", dump=True)
        assert server.wait(lambda: len(of_type(server.lines(), "mark")) == i + 1)
    ds = [m["dump"] for m in of_type(server.lines(), "mark")]
    assert ds[2]["removed"] == [ds[0]["path"]] and "removed" not in ds[1]
    assert sorted(os.listdir(dump_dir)) == sorted(os.path.basename(d["path"]) for d in ds[1:])
    # a byte limit below two dumps keeps the newest only
    monkeypatch.setenv("GPUTOP_DUMP_MAX_BYTES", str(ds[2]["bytes"] + 1))
    gputop.snapshot("s3", dump=True)
    assert server.wait(lambda: len(of_type(server.lines(), "mark")) == 4)
    d = of_type(server.lines(), "mark")[3]["dump"]
    assert d["removed"] == [ds[1]["path"], ds[2]["path"]] and os.listdir(dump_dir) == [os.path.basename(d["path"])]


def test_a_dump_never_replaces_a_file(dump_dir: str):
    os.makedirs(dump_dir)
    t = 1_764_590_000_123_000_000
    name = _dumps.file_name(os.getpid(), "Epoch 1", t)
    mine = os.path.join(dump_dir, name)
    with open(mine, "w") as f:
        f.write("the user's file")
    d = _dumps.write({"segments": [], "device_traces": []}, "Epoch 1", t, 1.0)
    assert d["path"] == mine[: -len(".pickle")] + "-2.pickle"
    with open(mine) as f:
        assert f.read() == "the user's file"
    # a second user file in the way: -3
    assert _dumps.write({"segments": []}, "Epoch 1", t, 1.0)["path"].endswith("-3.pickle")


NOBODY = 65534


def plant(dest: str, link: str, uid: int = NOBODY) -> None:
    """A symlink owned by uid (the tests run as root, as CI does)."""
    os.symlink(dest, link)
    os.lchown(link, uid, uid)


def test_a_dump_does_not_follow_another_users_link_in_a_sticky_dir(tmp_path, monkeypatch: pytest.MonkeyPatch):
    # the kernel's fs.protected_symlinks rule, applied to every link on the
    # way to the dump directory: nobody's links in a /tmp-like directory
    # are refused, root's own are followed
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = str(sticky / "dumps")
    plant(str(elsewhere), planted)
    dangling = str(sticky / "new")
    plant(str(tmp_path / "made"), dangling)
    for d, link in ((planted, planted), (os.path.join(planted, "run-1"), planted), (dangling, dangling)):
        monkeypatch.setenv("GPUTOP_DUMP_DIR", d)
        r = _dumps.write({"segments": []}, "x", time.time_ns(), 1.0)
        assert "path" not in r, d
        assert r["error"].startswith(f"the symlink {link} belongs to uid 65534"), r
        assert "fs.protected_symlinks" in r["error"] and "no dump was written" in r["error"]
        assert _dumps.status()["last_error"] == r["error"]
    assert os.listdir(elsewhere) == [] and not (tmp_path / "made").exists()

    own = str(sticky / "own")
    os.symlink(str(elsewhere), own)
    monkeypatch.setenv("GPUTOP_DUMP_DIR", own)
    r = _dumps.write({"segments": []}, "x", time.time_ns(), 1.0)
    assert r["path"].startswith(own + "/") and os.listdir(elsewhere) == [os.path.basename(r["path"])]


def test_a_dump_asked_while_one_is_written(server: LineServer, dump_dir: str):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    gpu.block(0, MiB)
    assert _dumps._lock.acquire()  # a dump being written
    try:
        gputop.snapshot("second", dump=True)
        assert server.wait(lambda: of_type(server.lines(), "mark"))
    finally:
        _dumps._lock.release()
    d = of_type(server.lines(), "mark")[0]["dump"]
    assert "a dump is being written" in d["error"] and "this one was not taken" in d["error"]
    assert "path" not in d and not os.path.exists(dump_dir)


def test_gputop_asks_for_a_dump(server: LineServer, dump_dir: str):
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach()  # without history: segments and blocks, no stacks
    gpu.block(0, 5 * MiB)
    assert server.wait(lambda: hellos(server))
    server.send(0, b'{"type":"request","what":"dump","id":7}\n')
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    m = of_type(server.lines(), "mark")[0]
    assert m["label"] == "dump" and m["end"] is False and m["devs"][0]["allocated"] == 5 * MiB
    with open(m["dump"]["path"], "rb") as f:
        assert len(pickle.load(f)["segments"]) == 1


def test_a_dump_asked_by_gputop_is_not_taken_where_its_snapshot_would_import(server: LineServer, dump_dir: str):
    gpu = FakeGPU(1)
    backend = gpu.install()
    backend.held_back = "with allocation history on, torch's memory snapshot imports torch._inductor"
    gputop.attach()
    gpu.block(0, 5 * MiB)
    assert server.wait(lambda: hellos(server))
    server.send(0, b'{"type":"request","what":"dump","id":7}\n')
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    err = of_type(server.lines(), "mark")[0]["dump"]["error"]
    assert err.startswith("not taken from gputop's thread: " + backend.held_back) and "gputop.dump()" in err
    assert not os.path.exists(dump_dir)


def test_dump_dir_that_cannot_be_made(server: LineServer, tmp_path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("GPUTOP_DUMP_DIR", str(tmp_path / "f" / "dumps"))
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    gpu.block(0, MiB)
    gputop.snapshot("x", dump=True)
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    err = of_type(server.lines(), "mark")[0]["dump"]["error"]
    assert err == f"{tmp_path / 'f' / 'dumps'}: Not a directory"
    assert gputop.status()["dumps"]["last_error"] == err


def test_full_disk_during_a_dump_leaves_training_running(tmp_path):
    """A file-size limit below the dump's size: the write fails with EFBIG
    (Python ignores SIGXFSZ), the dump says so, its temporary file is
    gone, and the training loop carries on to the end."""
    code = textwrap.dedent(f"""
        import os, resource, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        from fakegpu import FakeGPU, MiB
        import gputop
        from gputop import _dumps
        gpu = FakeGPU(1)
        gpu.install()
        gputop.attach(history=1000)
        t = time.time()
        while not gpu.source.oom_callbacks and time.time() - t < 10:
            time.sleep(0.01)  # the agent thread registers torch's OOM observer
        blocks = [gpu.block(0, MiB) for _ in range(200)]   # a dump of some 60 KB
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        gputop.snapshot("big", dump=True)
        gpu.oom(0, 1 << 40)
        steps = 0
        for _ in range(100):
            blocks.append(gpu.block(0, MiB)); steps += 1
        from gputop import _lifecycle
        ag = _lifecycle._current
        # no gputop: the frames stay queued; wait until the thread has written
        # (tried to write) the labelled one, which may have waited for the OOM's
        t = time.time()
        while any("_dump" in f for f in list(ag._marks)) and time.time() - t < 20:
            time.sleep(0.01)
        errs = [f["dump"].get("error", "") for f in ag._marks if "dump" in f]
        gputop.detach()
        print("steps", steps)
        print("errors", " | ".join(sorted(errs)))
        print("files", os.listdir(os.environ["GPUTOP_DUMP_DIR"]))
    """)
    env = child_env(GPUTOP_DUMP_DIR=str(tmp_path / "d"), GPUTOP_SOCKET=str(tmp_path / "none.sock"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert out["steps"] == "100"
    errs = out["errors"].split(" | ")
    assert len(errs) == 2 and all(e.endswith("File too large") and ".tmp" in e for e in errs), errs
    assert "-OOM-" in errs[0] + errs[1] and "-big-" in errs[0] + errs[1]
    assert out["files"] == "[]"


def test_memory_viz_reads_the_agents_dump(server: LineServer, dump_dir: str, tmp_path):
    """torch's own memory_viz loader (the CPU torch here) on a dump the
    agent pickled: stats and trace_plot."""
    pytest.importorskip("torch")
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    _grow(gpu, [], 5)
    gputop.snapshot("viz", dump=True)
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    path = of_type(server.lines(), "mark")[0]["dump"]["path"]
    html = str(tmp_path / "trace.html")
    for args in (["stats", path], ["trace_plot", path, "-o", html]):
        p = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", *args], capture_output=True,
                           text=True, timeout=120, cwd=str(tmp_path))
        assert p.returncode == 0, p.stderr
    assert os.path.getsize(html) > 1000


def test_gpu_check_reads_dump_info_as_it_expects(gputop_bin: str):
    """bench/history_check.py's parsing of `gputop dump-info`, on the real
    H200 OOM dump: the top frame and its block count."""
    sys.path.insert(0, str(TESTS.parents[1] / "bench"))
    try:
        import history_check
    finally:
        sys.path.pop(0)
    oom = str(TESTS.parents[1] / "testdata" / "memdump" / "oom.pickle")
    rc, text, frames = history_check.dump_info(gputop_bin, oom)
    info = json.loads((TESTS.parents[1] / "testdata" / "memdump" / "info.json").read_text())
    assert rc == 0 and "make_dumps.py:61 <module>" in frames[0]
    assert history_check.blocks_of(frames[0]) == info["held_blocks"]
    assert "out of memory: 8.00 GiB asked for at" in text


EXIT_CHILD = """
import os, pickle, sys, time
sys.path.insert(0, {tests!r})
from fakegpu import FakeGPU, MiB
import gputop
from gputop import _dumps
slow = pickle.dumps
def dumps(*a, **k):
    time.sleep(2.5)  # a large history: pickling takes seconds
    return slow(*a, **k)
_dumps.pickle = type("P", (), {{"dumps": staticmethod(dumps)}})
gpu = FakeGPU(1)
gpu.install()
gputop.attach(history=1000)
gpu.block(0, MiB)
gputop.snapshot("last words", dump=True)
time.sleep({pause})
"""


@pytest.mark.parametrize("pause", [0, 0.5], ids=["waiting", "being_written"])
def test_exit_waits_for_a_dump_being_written(tmp_path, pause):
    """A program that asks for a dump as its last act and exits: the
    interpreter waits for the agent thread to finish the file (it would
    otherwise kill it after the 1 s bye), and no temporary file is left;
    also when the exit comes while the agent thread is already pickling."""
    d = tmp_path / "d"
    env = child_env(GPUTOP_DUMP_DIR=str(d), GPUTOP_SOCKET=str(tmp_path / "none.sock"))
    p = subprocess.run([sys.executable, "-c", EXIT_CHILD.format(tests=str(TESTS), pause=pause)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    names = os.listdir(d)
    assert len(names) == 1 and names[0].endswith(".pickle") and "last_words" in names[0], names
    with open(d / names[0], "rb") as f:
        assert len(pickle.load(f)["segments"]) == 1


def test_dumps_through_gputop_record_to_the_csv(gputop_bin: str, tmp_path, sock_path: str):
    """The real `gputop record` and `gputop export`: the labelled row and the
    OOM row name their dumps in the recording and the CSV's last column."""
    from test_e2e import Recorder, recording

    rec = Recorder(gputop_bin, tmp_path / "rec.gputop", sock_path, tmp_path / "rec.log")
    d = tmp_path / "d"
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
        hold = [gpu.block(0, 4 * MiB) for _ in range(3)]
        gputop.snapshot("Epoch 2", dump=True)
        gpu.oom(0, 1 << 40)
        while len(gputop.status()["dumps"]["written"]) < 2 and time.time() - t < 10:
            time.sleep(0.02)
        print(gputop.status()["dumps"], file=sys.stderr)
        print(" ".join(gputop.status()["dumps"]["written"]))
    """)
    try:
        p = subprocess.run([sys.executable, "-c", code], env=child_env(GPUTOP_SOCKET=sock_path, GPUTOP_DUMP_DIR=str(d)),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        time.sleep(0.3)
    finally:
        rec.stop()
    written = p.stdout.split()
    assert len(written) == 2, p.stderr
    oom = next(w for w in written if "-OOM-" in os.path.basename(w))
    labelled = next(w for w in written if "-Epoch_2-" in os.path.basename(w))
    snaps = [f for f in recording(rec.rec) if f["type"] == "snapshot" and f["label"] == "Epoch 2"]
    assert snaps[0]["dump"]["path"] == labelled
    ooms = [f for f in recording(rec.rec) if f["type"] == "oom"]
    assert ooms[0]["dump"]["path"] == oom and ooms[0]["dump"]["gil_ms"] > 0
    out = tmp_path / "rec.csv"
    r = subprocess.run([gputop_bin, "export", str(rec.rec), "--csv", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert "dump" in rows[0]  # the column after the first 32 (docs/recordings.md's "Summary CSV")
    assert {r["label"]: r["dump"] for r in rows} == {"Epoch 2": labelled, "OOM": oom}


def test_magic_history(server: LineServer, capsys: pytest.CaptureFixture):
    """%gputop --history N (called as the magic's function)."""
    gpu = FakeGPU(1)
    gpu.install()
    from gputop import _magics

    _magics.gputop_magic(None, "--history 500")
    assert "recording torch's allocation history (max_entries 500)" in capsys.readouterr().out
    assert gpu.memory.calls[-1]["max_entries"] == 500
    with pytest.raises(Exception, match="--history wants a number of entries >= 0"):
        _magics.gputop_magic(None, "--history -3")
    with pytest.raises(Exception, match="--history wants a number"):
        _magics.gputop_magic(None, "--history lots")


def test_a_forked_child_has_its_own_dumps(dump_dir: str):
    """A child forked while the parent writes a dump (a DataLoader worker)
    neither waits for the parent's lock nor counts the parent's dumps."""
    parent = _dumps.write({"segments": []}, "parent", time.time_ns(), 1.0)["path"]
    assert _dumps._lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:
            ok = "path" in _dumps.write({"segments": []}, "child", time.time_ns(), 1.0, wait=0.5)
            os._exit(0 if ok and _dumps.status()["written"] != [parent] and os.path.exists(parent) else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        _dumps._lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
    assert _dumps.status()["written"] == [parent]


def test_at_init_from_inside_torchs_lazy_init_runs_at_once(monkeypatch: pytest.MonkeyPatch):
    # gputop run --history N: the agent attaches inside torch's lazy init and
    # asks for history there. torch 2.11's _lazy_call takes the init lock
    # _lazy_init holds while it runs the queued calls, so queueing from there
    # hung the program on the H200; it must run at once instead.
    import torch

    from gputop import _torch

    def lazy_call_of_torch_2_11(fn, **kw):
        raise AssertionError("_lazy_call from inside the lazy init: torch 2.11 waits for its own lock here")

    monkeypatch.setattr(torch.cuda, "_lazy_call", lazy_call_of_torch_2_11)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    ran: list[int] = []
    torch.cuda._tls.is_initializing = True
    try:
        why = _torch.TorchBackend().at_init(lambda: ran.append(1))
    finally:
        del torch.cuda._tls.is_initializing
    assert why == "" and ran == [1]
    # outside the init, before it: queued for it, as before
    queued: list = []
    monkeypatch.setattr(torch.cuda, "_lazy_call", lambda fn, **kw: queued.append(fn))
    assert _torch.TorchBackend().at_init(lambda: ran.append(2)) == "" and len(queued) == 1 and ran == [1]
