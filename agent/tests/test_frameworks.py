"""JAX and CuPy beside torch, end to end: the real gputop binary
(`gputop record`), the real socket, a child Python process running the
real gputop package over fake JAX and CuPy modules (fakeframeworks.py);
then `gputop export --csv`: each framework's figures in the rows, to the
byte, apart from torch's and in their own names, and the end rows'
verdicts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from test_e2e import Child, Recorder, recording

MiB = 1 << 20


def FwChild(sock: str, log: Path, fw: str, ndev: int = 1, **env: str) -> Child:
    """framework_child.py over fake JAX or CuPy (fw) with ndev GPUs, one
    command at a time."""
    return Child(sock, log, ndev=ndev, script="framework_child.py", FAKE_FW=fw, **env)


@pytest.fixture
def fw(gputop_bin: str, tmp_path: Path, sock_path: str):
    made: list[Any] = []

    class Env:
        bin = gputop_bin
        dir = tmp_path
        sock = sock_path

        def recorder(self) -> Recorder:
            r = Recorder(gputop_bin, tmp_path / "rec.ndjson", sock_path, tmp_path / "rec.log")
            made.append(r)
            return r

        def child(self, kind: str, ndev: int = 1, **env: str) -> Child:
            c = FwChild(sock_path, tmp_path / "child.log", kind, ndev, **env)
            made.append(c)
            return c

        def export(self, rec: Path) -> list[dict[str, str]]:
            import csv
            out = tmp_path / "rows.csv"
            r = subprocess.run([gputop_bin, "export", str(rec), "--csv", str(out)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            self.stdout = r.stdout
            with open(out, newline="") as f:
                rows = list(csv.reader(f))
            assert "framework" in rows[0], rows[0]  # read by name: columns only grow at the end
            return [dict(zip(rows[0], x)) for x in rows[1:]]

    yield Env()
    for m in made:
        m.kill()


def cell(fws: list[dict]) -> str:
    """The CSV's framework cell of what snapshot() returned."""
    return "; ".join(f["name"] + "".join(f" {g['native']}={g['value']}" for g in f["figures"]) for f in fws)


def test_jax_rows_carry_memory_stats_to_the_byte(fw):
    rec = fw.recorder()
    c = fw.child("jax")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("jinit")
    assert c("wait_devices 10")["ok"]
    c("jarray params 1024 1024")
    c("jarray opt_state 1024 2048")
    got = {"Training start": c("snap Training start")}
    time.sleep(0.4)  # a framework frame or more since the arrays came
    shell = c("stats")["jax"]
    r = subprocess.run([fw.bin, "snap", "from the shell", "--socket", fw.sock], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    c("jarray activations 4096 1024")
    got["Epoch 1"] = c("snap Epoch 1")
    c("jdel activations")
    c("jdel opt_state")
    got["Training end"] = c("snap Training end")  # an end row: params still live
    c("jdel params")
    got["After cleanup"] = c("snap After cleanup")
    assert c("inits")["inits"] == 0, "the agent created JAX's backend"
    pid = c.p.pid
    c.exit()
    time.sleep(0.3)
    rec.stop()

    rows = {r["label"]: r for r in fw.export(rec.rec)}
    for label, g in got.items():
        fws = g["values"]["0"]["frameworks"]
        stats = g["stats"]["jax"]
        jx = {f["native"]: f["value"] for f in fws[0]["figures"]}
        # every figure is memory_stats()'s at that moment, to the byte, in JAX's names
        assert jx == {k: v for k, v in stats.items() if k in jx} and set(jx) == set(stats), (label, jx, stats)
        r = rows[label]
        assert r["pid"] == str(pid)
        assert r["framework"] == cell(fws), label
        # never torch's: a JAX process's row has no torch figures
        assert r["allocated_bytes"] == r["reserved_bytes"] == r["peak_bytes"] == "", r
    # a row taken from outside (gputop snap, the s key): the newest reading then
    assert rows["from the shell"]["framework"].startswith(f"jax bytes_in_use={shell['bytes_in_use']} pool_bytes={shell['pool_bytes']} "), rows["from the shell"]
    assert rows["from the shell"]["allocated_bytes"] == ""
    assert rows["Training start"]["framework"].startswith("jax bytes_in_use=12582912 pool_bytes=113066115072 peak_bytes_in_use=12582912 bytes_limit=113066115072")
    # the end rows' verdicts: live arrays by the variable holding them; then nothing
    assert rows["Training end"]["verdict"] == "held", rows["Training end"]
    assert "params (1 array float32[1024, 1024]) 4.0 MiB" in rows["Training end"]["verdict_text"]
    assert rows["Training end"]["top_holder"] == "params"
    assert rows["After cleanup"]["verdict"] == "released", rows["After cleanup"]
    assert "nothing of yours holds jax memory (bytes_in_use 0 B)" in rows["After cleanup"]["verdict_text"]
    # the live figures: framework frames in the recording, settings with them
    frames = [f for f in recording(rec.rec) if f.get("type") == "framework"]
    assert frames, "no framework frame recorded"
    settings = {s["name"]: s["value"] for s in frames[-1]["frameworks"][0]["settings"]}
    assert set(settings) == {"XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                             "XLA_PYTHON_CLIENT_ALLOCATOR"}


def test_jax_without_preallocation_leaves_out_what_memory_stats_lacks(fw):
    rec = fw.recorder()
    c = fw.child("jax", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    c("attach")
    c("jinit")
    assert c("wait_devices 10")["ok"]
    c("jarray x 512 512")
    g = c("snap step")
    c.exit()
    time.sleep(0.3)
    rec.stop()
    row = {r["label"]: r for r in fw.export(rec.rec)}["step"]
    # no pool_bytes, no largest_alloc_size: absent, never 0
    assert row["framework"] == "jax bytes_in_use=1048576 bytes_reserved=1048576 peak_bytes_in_use=1048576 bytes_limit=113066115072 num_allocs=1", row
    assert g["stats"]["jax"]["bytes_reserved"] == 1048576
    frames = [f for f in recording(rec.rec) if f.get("type") == "framework"]
    assert {"name": "XLA_PYTHON_CLIENT_PREALLOCATE", "value": "false"} in frames[-1]["frameworks"][0]["settings"]


def test_cupy_rows_and_the_pool_verdict(fw):
    rec = fw.recorder()
    c = fw.child("cupy")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("calloc 10000000")
    assert c("wait_devices 10")["ok"]
    start = c("snap start")
    c("cfree 10000000")
    end = c("snap After cleanup")
    c.exit()
    time.sleep(0.3)
    rec.stop()
    rows = {r["label"]: r for r in fw.export(rec.rec)}
    assert rows["start"]["framework"] == "cupy used_bytes=10000000 total_bytes=10000384 free_bytes=384 pinned_n_free_blocks=3"
    assert start["stats"]["cupy"] == {"used_bytes": 10000000, "total_bytes": 10000384}
    assert rows["After cleanup"]["framework"] == cell(end["values"]["0"]["frameworks"])
    v = rows["After cleanup"]
    assert v["verdict"] == "released" and v["allocated_bytes"] == ""
    assert "10000384" in v["framework"] and "used_bytes=0" in v["framework"]
    assert "cupy.get_default_memory_pool().free_all_blocks() returns it" in v["verdict_text"], v["verdict_text"]


def test_torch_and_cupy_in_one_process_keep_apart(fw):
    rec = fw.recorder()
    c = fw.child("torch+cupy")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("talloc 20971520")
    c("calloc 3000000")
    assert c("wait_devices 10")["ok"]
    g = c("snap both")
    c.exit()
    time.sleep(0.3)
    rec.stop()
    row = {r["label"]: r for r in fw.export(rec.rec)}["both"]
    v = g["values"]["0"]
    assert row["allocated_bytes"] == str(v["allocated"]) == "20971520"  # torch's, as torch's
    assert row["framework"] == cell(v["frameworks"])
    assert row["framework"].startswith("cupy used_bytes=3000000 ")  # CuPy's, apart


def test_frameworks_on_the_metrics_endpoint(gputop_bin: str, tmp_path: Path, sock_path: str):
    """`gputop serve --metrics`: gputop_framework_* series with framework
    and native labels, the figures of a JAX and a CuPy process; no
    gputop_torch_* series for either."""
    import os
    import socket

    from test_metrics import scrape

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    log = open(tmp_path / "serve.log", "w")
    srv = subprocess.Popen([gputop_bin, "serve", "--source", "agent", "--socket", sock_path, "--metrics", addr],
                           stdout=log, stderr=subprocess.STDOUT)
    kids = []
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(sock_path):
            assert srv.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.02)
        j = FwChild(sock_path, tmp_path / "jax.log", "jax")
        cp = FwChild(sock_path, tmp_path / "cupy.log", "cupy")
        kids = [j, cp]
        j("attach")
        j("jinit")
        j("jarray w 2048 1024")
        cp("attach")
        cp("calloc 7000000")
        assert j("wait_devices 10")["ok"] and cp("wait_devices 10")["ok"]
        js, cs = j("stats")["jax"], cp("stats")["cupy"]
        want = {
            (str(j.p.pid), "jax", "gputop_framework_in_use_bytes", "bytes_in_use"): js["bytes_in_use"],
            (str(j.p.pid), "jax", "gputop_framework_reserved_bytes", "pool_bytes"): js["pool_bytes"],
            (str(j.p.pid), "jax", "gputop_framework_peak_bytes", "peak_bytes_in_use"): js["peak_bytes_in_use"],
            (str(j.p.pid), "jax", "gputop_framework_limit_bytes", "bytes_limit"): js["bytes_limit"],
            (str(cp.p.pid), "cupy", "gputop_framework_in_use_bytes", "used_bytes"): cs["used_bytes"],
            (str(cp.p.pid), "cupy", "gputop_framework_reserved_bytes", "total_bytes"): cs["total_bytes"],
        }
        got: dict = {}
        torch_series: list = []
        deadline = time.monotonic() + 15
        while got != want and time.monotonic() < deadline:
            got, torch_series = {}, []
            for name, lab, v in scrape(f"http://{addr}/metrics"):
                if name.startswith("gputop_framework_"):
                    got[(lab["pid"], lab["framework"], name, lab["native"])] = int(v)
                elif name.startswith("gputop_torch_allocated_bytes"):
                    torch_series.append(lab)
            time.sleep(0.1)
        assert got == want
        assert not torch_series, "a JAX or CuPy process exported as torch's"
    finally:
        for k in kids:
            k.kill()
        srv.terminate()
        assert srv.wait(20) == 0, (tmp_path / "serve.log").read_text()
        log.close()


@pytest.mark.parametrize("kind", ["jax", "cupy"])
def test_a_framework_oom_is_explained(fw, kind):
    """XLA's RESOURCE_EXHAUSTED (jaxlib's XlaRuntimeError) and CuPy's
    OutOfMemoryError, ending the program: an OOM row with the framework's
    figures then, and `gputop export` explains it in the framework's terms."""
    rec = fw.recorder()
    c = fw.child(kind)
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    if kind == "jax":
        c("jinit")
        c("jarray params 1024 1024")
    else:
        c("calloc 10000000")
        c("cfree 4000000")
    assert c("wait_devices 10")["ok"]
    asked = 128849018880 if kind == "jax" else 17179869184  # JAX: 120 GiB, past XLA's 75% of 140.4 GiB
    c(f"{kind}_oom {asked}")
    assert c.p.wait(15) == 1, c.logpath.read_text()
    assert ("XlaRuntimeError" if kind == "jax" else "OutOfMemoryError") in c.logpath.read_text()  # the program's own hook ran
    time.sleep(0.3)
    rec.stop()
    rows = {r["label"]: r for r in fw.export(rec.rec)}
    oom = rows["OOM"]
    assert oom["allocated_bytes"] == "" and oom["oom_requested_bytes"] == str(asked), oom
    found = fw.stdout
    if kind == "jax":
        assert oom["framework"].startswith("jax bytes_in_use=4194304 pool_bytes=113066115072"), oom
        assert "XLA (JAX): RESOURCE_EXHAUSTED, asked for 120.0 GiB." in found, found
        assert ("4.0 MiB in use (bytes_in_use) and the 120.0 GiB asked pass XLA's limit, bytes_limit 105.3 GiB. "
                "Suggestion: XLA takes 75% of the GPU by default; XLA_PYTHON_CLIENT_MEM_FRACTION=.9 gives it more") in found, found
    else:
        assert oom["framework"].startswith("cupy used_bytes=6000000 total_bytes=10000384"), oom
        assert "CuPy's memory pool: cupy.cuda.memory.OutOfMemoryError, asked for 16.00 GiB." in found, found
        assert "cupy.get_default_memory_pool().free_all_blocks() before the large allocation" in found, found


def test_gputop_run_attaches_to_a_jax_program_with_no_code_change(gputop_bin: str, tmp_path: Path):
    """`gputop run -- python train.py`: a program that imports jax (the
    fake one, imported as the real one is) and never gputop gets its
    Process start row once JAX has a GPU and its Process end row with a
    verdict, JAX's figures in both."""
    from test_run import run_env

    out = tmp_path / "rows.csv"
    code = (
        "import jax\n"
        "import time\n"
        "jax.fake.backend_init()\n"
        "w = jax.fake.array(0, (1024, 1024))\n"
        "time.sleep(0.5)\n"
        "print('in use', jax.local_devices()[0].memory_stats()['bytes_in_use'], flush=True)\n"
    )
    env = run_env(PYTHONPATH=str(TESTS / "fakemodules"))
    r = subprocess.run([gputop_bin, "run", "--no-tui", "--source", "agent", "--csv", str(out), "--",
                        sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "in use 4194304\n"
    import csv
    with open(out, newline="") as f:
        got = {row["label"]: row for row in csv.DictReader(f)}
    assert set(got) == {"Process start", "Process end"}, got
    assert got["Process end"]["framework"].startswith("jax bytes_in_use=4194304 pool_bytes=113066115072"), got
    assert got["Process end"]["allocated_bytes"] == ""  # no torch figures, never torch's words
    assert got["Process end"]["verdict"] == "held" and got["Process end"]["top_holder"] == "w", got


def test_cleanup_frees_cupys_pools_and_says_what_is_still_used(fw):
    """gputop.cleanup() in a CuPy program: after gc, the default pool's and
    the pinned pool's free_all_blocks(); what it released and what is
    still used, by CuPy's own figures before and after."""
    rec = fw.recorder()
    c = fw.child("cupy")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("calloc 10000000")
    c("cfree 4000000")
    assert c("wait_devices 10")["ok"]
    got = c("cleanup")
    c.exit()
    time.sleep(0.3)
    rec.stop()
    [r] = got["result"]["frameworks"]
    assert (r["framework"], r["device"], r["in_use"], r["reserved"]) == ("cupy", 0, "used_bytes", "total_bytes")
    assert r["before"]["used_bytes"] == 6000000 and r["before"]["total_bytes"] == 10000384
    # the pool's own figures after, as the pool itself counts them then
    assert r["after"]["total_bytes"] == got["stats"]["cupy"]["total_bytes"] == 6000000
    assert r["released_reserved_bytes"] == 4000384 and r["released_in_use_bytes"] == 0
    assert r["in_use_bytes"] == 6000000 and r["reserved_bytes"] == 6000000
    steps = {s["step"]: s for s in r["steps"]}
    assert list(steps) == ["gc.collect", "cupy: get_default_memory_pool().free_all_blocks",
                           "cupy: get_default_pinned_memory_pool().free_all_blocks"], r["steps"]
    assert steps["cupy: get_default_memory_pool().free_all_blocks"]["released_reserved_bytes"] == 4000384
    assert got["pinned_freed"] == 1
    assert ("cupy: released 0.00 MB in use (used_bytes), 3.82 MB held (total_bytes); "
            "still used_bytes 5.72 MB, total_bytes 5.72 MB") in got["printed"], got["printed"]
    rows = {x["label"]: x for x in fw.export(rec.rec)}
    assert "total_bytes=10000384" in rows["Before cleanup"]["framework"]
    assert "used_bytes=6000000 total_bytes=6000000 free_bytes=0" in rows["After cleanup"]["framework"]


def test_cleanup_of_jax_collects_clears_caches_and_keeps_the_users_arrays(fw):
    """gputop.cleanup() in a JAX program: gc.collect() frees an array only a
    cycle kept, jax.clear_caches() what compiled computations kept; the
    array a variable holds stays live and is named, with XLA's pool kept."""
    rec = fw.recorder()
    c = fw.child("jax")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("jinit")
    assert c("wait_devices 10")["ok"]
    c("jarray params 1024 1024")  # 4 MiB, held by __main__'s params
    c("jcycle tmp 1024 512")  # 2 MiB, only a reference cycle keeps it
    c("jcompile 1000000")
    got = c("cleanup")
    c.exit()
    time.sleep(0.3)
    rec.stop()
    [r] = got["result"]["frameworks"]
    assert (r["framework"], r["in_use"], r["reserved"]) == ("jax", "bytes_in_use", "pool_bytes")
    assert r["before"]["bytes_in_use"] == 4194304 + 2097152 + 1000000
    assert r["after"]["bytes_in_use"] == got["stats"]["jax"]["bytes_in_use"] == r["in_use_bytes"] == 4194304
    assert r["released_in_use_bytes"] == 2097152 + 1000000 and r["released_reserved_bytes"] == 0
    steps = {s["step"]: s for s in r["steps"]}
    assert steps["gc.collect"]["released_in_use_bytes"] == 2097152
    assert steps["jax: jax.clear_caches"]["released_in_use_bytes"] == 1000000
    assert got["cleared"] == 1
    # never the user's arrays: params is still live, and named
    assert got["live_arrays"] == 1 and r["live_arrays"] == 1 and r["live_array_bytes"] == 4194304
    assert r["held"][0]["name"] == "params" and r["held"][0]["hint"] == "del params"
    assert "still bytes_in_use 4.00 MB, pool_bytes 107828.25 MB, 1 live array 4.00 MB (params 4.00 MB)" in got["printed"], got["printed"]
    rows = {x["label"]: x for x in fw.export(rec.rec)}
    assert rows["After cleanup"]["verdict"] == "held" and rows["After cleanup"]["top_holder"] == "params"
    assert "bytes_in_use=4194304" in rows["After cleanup"]["framework"]


def test_an_end_row_from_outside_names_jaxs_live_arrays(fw):
    """An end row taken from outside the process (`gputop snap`, as the s
    and c keys take it) asks the JAX process's agent for its holders: the
    verdict names the live arrays by the variable holding them, as an end
    row from code does; a replay keeps it (the held frame)."""
    rec = fw.recorder()
    c = fw.child("jax")
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("jinit")
    assert c("wait_devices 10")["ok"]
    c("jarray params 1024 1024")
    c("jarray opt_state 1024 2048")
    time.sleep(0.4)  # a framework frame since the arrays came
    r = subprocess.run([fw.bin, "snap", "After cleanup", "--socket", fw.sock], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    time.sleep(0.5)  # the holders walk's answer
    pid = c.p.pid
    c.exit()
    time.sleep(0.3)
    rec.stop()
    row = {x["label"]: x for x in fw.export(rec.rec)}["After cleanup"]
    assert row["pid"] == str(pid) and row["allocated_bytes"] == "", row
    assert row["verdict"] == "held" and row["top_holder"] == "opt_state", row
    assert ("opt_state (1 array float32[1024, 2048]) 8.0 MiB, params (1 array float32[1024, 1024]) 4.0 MiB: del opt_state"
            in row["verdict_text"]), row["verdict_text"]
    held = [f for f in recording(rec.rec) if f.get("type") == "held" and f.get("pid") == pid]
    assert held and [g["name"] for g in held[0]["frameworks"][0]["held"]] == ["opt_state", "params"], held


@pytest.mark.parametrize("kind", ["jax", "cupy"])
def test_h_and_c_in_the_terminal_show_what_holds_a_frameworks_memory(gputop_bin: str, tmp_path: Path, sock_path: str, kind):
    """The real TUI in tmux beside a JAX (or CuPy) process: c's end row
    names the live arrays (CuPy: the pool's used and free), and h's pane
    shows the framework's figures and its holders, not figures only."""
    import shutil

    from conftest import Tmux
    assert shutil.which("tmux"), "tmux is needed for the terminal tests"
    term = Tmux([gputop_bin, "--source", "agent", "--socket", sock_path])
    c = None
    try:
        term.wait_for("agents: listening on")
        c = FwChild(sock_path, tmp_path / "child.log", kind)
        c("attach")
        assert c("wait_connects 1 10")["ok"]
        if kind == "jax":
            c("jinit")
            c("jarray params 1024 1024")
        else:
            c("calloc 10000000")
            c("cfree 4000000")
        assert c("wait_devices 10")["ok"]
        time.sleep(0.5)  # a framework frame: the row has its figures
        term.keys("c")
        term.wait_for("snapshot label: After cleanup")
        term.keys("Enter")
        if kind == "jax":
            scr = term.wait_for("params (1 array float32[1024, 1024]) 4.0 MiB")
            assert "✗ After cleanup: 4.0 MiB still in use (bytes_in_use): params" in " ".join(scr.split()), scr
        else:
            scr = term.wait_for("After cleanup: 5.7 MiB still in use (used_bytes)")
        # the process table: the framework's figures where torch's would be, named
        text = " ".join(scr.split())
        assert (f"{c.p.pid} framework_child.py — jax 4.0 MiB jax 105.3 GiB" if kind == "jax" else
                f"{c.p.pid} framework_child.py — cupy 5.7 MiB cupy 9.5 MiB") in text, scr
        assert ("in use (jax bytes_in_use)" if kind == "jax" else "in use (cupy used_bytes)") in text, scr
        term.keys("h")
        if kind == "jax":
            scr = term.wait_for("jax variable")  # the table of the answer
            text = " ".join(scr.split())
            assert "jax.live_arrays(): 1 array, 4.0 MiB in 1 group" in text, scr
            assert "jax variable params 4.00 1 float32[1024, 1024] del params" in text, scr
            assert "torch has not initialised cuda:0 in this process" in text, scr
        else:
            scr = term.wait_for("HOLDERS of pid")
            assert "cupy: used_bytes 5.7 MiB in use of the total_bytes 9.5 MiB it holds (60%)" in scr, scr
            assert "(60%); 3.8 MiB free: cupy.get_default_memory_pool().free_all_blocks() returns it" in " ".join(scr.split()), scr
    finally:
        if c is not None:
            c.kill()
        term.close()


# XLA's out-of-memory messages as JAX raises them (jaxlib's XlaRuntimeError),
# as users have reported them: PJRT's names the device's ordinal, the BFC
# allocator's names none
PJRT_OOM = "RESOURCE_EXHAUSTED: Failed to allocate request for 2.99GiB (3206250496B) on device ordinal {}"
BFC_OOM = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.\n"
           "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n             parameter allocation:  372.76MiB")


def test_jax_oom_messages_are_read_for_their_size_and_device():
    from fakeframeworks import XlaRuntimeError
    from gputop import _fwoom

    assert _fwoom.classify(XlaRuntimeError(PJRT_OOM.format(1))) == ("jax", 3206250496, 1)
    assert _fwoom.classify(XlaRuntimeError(BFC_OOM)) == ("jax", 4770354232, None)
    assert _fwoom.classify(XlaRuntimeError("RESOURCE_EXHAUSTED: something else")) == ("jax", 0, None)
    # read within the bound only: a device named past it is not taken
    late = XlaRuntimeError("RESOURCE_EXHAUSTED: " + "x" * _fwoom.MAX_ERROR + PJRT_OOM.format(1))
    assert _fwoom.classify(late) == ("jax", 0, None)
    # no RESOURCE_EXHAUSTED: no OOM of XLA's
    assert _fwoom.classify(XlaRuntimeError("INTERNAL: on device ordinal 1")) is None


@pytest.mark.parametrize("named", [True, False])
def test_a_jax_oom_goes_on_the_device_its_message_names(fw, named):
    """A JAX process on two GPUs: PJRT's OOM naming ordinal 1 is put on
    that GPU with its figures; the BFC allocator's, naming none, is said
    to be of an unknown GPU rather than put on the first as if known."""
    rec = fw.recorder()
    c = fw.child("jax", ndev=2)
    c("attach")
    assert c("wait_connects 1 10")["ok"]
    c("jinit")
    c("jarray params 1024 1024")  # on ordinal 0
    assert c("wait_devices 10")["ok"]
    time.sleep(0.3)
    c("jax_oom_text " + (PJRT_OOM.format(1) if named else BFC_OOM.replace("\n", "\\n")))
    assert c.p.wait(15) == 1, c.logpath.read_text()
    time.sleep(0.3)
    rec.stop()
    oom = {r["label"]: r for r in fw.export(rec.rec)}["OOM"]
    frames = [f for f in recording(rec.rec) if f.get("type") == "oom"]
    assert len(frames) == 1, frames
    if named:
        assert oom["oom_requested_bytes"] == "3206250496", oom
        assert frames[0]["dev"] == 1 and "dev_unknown" not in frames[0], frames[0]
        assert oom["framework"].startswith("jax bytes_in_use=0 "), oom  # ordinal 1's figures, not 0's
        assert "names no GPU" not in fw.stdout
    else:
        assert oom["oom_requested_bytes"] == "4770354232", oom
        assert frames[0]["dev_unknown"] is True, frames[0]
        assert ("The error names no GPU and the process uses jax on several: which one ran out is unknown "
                f"(shown on GPU {oom['device']}, its first, with that GPU's figures).") in fw.stdout, fw.stdout


def test_live_arrays_are_looked_at_up_to_a_bound(monkeypatch):
    """jax.live_arrays() is read up to MAX_ARRAYS arrays a reading; past
    it a group says how many were not looked at, and the counts are those
    of the arrays looked at."""
    from fakeframeworks import FakeJax
    from gputop import _jax

    fake = FakeJax()
    for name in ("jax", "jax._src", "jax._src.xla_bridge"):
        monkeypatch.setitem(sys.modules, name, {"jax": fake.jax, "jax._src": fake.jax._src,
                                                "jax._src.xla_bridge": fake.xb}[name])
    monkeypatch.setattr(_jax, "MAX_ARRAYS", 3)
    keep = [fake.array(0, (256, 256)) for _ in range(5)]  # 256 KiB each
    groups, count, nbytes = _jax._live(0)
    assert (count, nbytes) == (3, 3 * 262144), (count, nbytes)
    assert groups[-1]["name"] == "arrays not looked at" and groups[-1]["tensors"] == 2, groups
    assert "first 3 of jax.live_arrays()" in groups[-1]["hint"]
    assert len(keep) == 5
