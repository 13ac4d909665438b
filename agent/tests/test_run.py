"""`gputop run -- CMD`: the real binary starts a real Python (or not) with
the agent injected through its sitecustomize, over the real socket. The
allocator is the pretend one of fakegpu.py; FakeGPU.init_cuda() runs what
torch's lazy CUDA init runs (the calls queued with torch.cuda._lazy_call),
so the agent attaches where it would on a GPU: at the first CUDA use."""

from __future__ import annotations

import csv
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import AGENT, FAKE_GPU_PRELUDE, Tmux

_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
_need("torch")

MiB = 1 << 20

PRELUDE = FAKE_GPU_PRELUDE


def run_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPUTOP", "GPUTOP_SOCKET", "GPUTOP_AGENT_PATH")}
    env["GPUTOP_AGENT_PATH"] = str(AGENT)
    env["GPUTOP_HOLDERS_DEVICE"] = "cpu"
    env.update(extra)
    return env


def gputop_run(gputop_bin: str, *cmd: str, flags: tuple[str, ...] = ("--source", "agent"),
               env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([gputop_bin, "run", "--no-tui", *flags, "--", *cmd], env=env or run_env(),
                          capture_output=True, text=True, timeout=timeout)


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", PRELUDE + textwrap.dedent(code))


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_run_attaches_at_first_cuda_use_and_keeps_the_exit_code(gputop_bin: str, tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    r = gputop_run(gputop_bin, *python(
        """
        gpu.init_cuda()                       # torch's lazy init: the agent attaches here
        gpu.alloc(0, 100 * 1024 * 1024)
        kept = torch.zeros(1024)
        gpu.tensor_block(0, kept)
        gpu.oom(0, 1 << 40)
        a = gpu.c[0]
        print("script:", a["allocated"], a["reserved"], a["peak"], flush=True)
        sys.exit(3)
        """), flags=("--source", "agent", "--csv", str(out)))
    assert r.returncode == 3, r.stderr
    # CMD's standard output passes through unchanged; gputop speaks on stderr
    assert r.stdout.startswith("script: ") and r.stdout.count("\n") == 1, r.stdout
    allocated, reserved, peak = (int(x) for x in r.stdout.split()[1:])
    assert "exited with code 3" in r.stderr
    assert "agent attached in 1 process(es)" in r.stderr
    table = [l for l in r.stderr.splitlines() if l.startswith(("label ", "Process ", "OOM "))]
    assert [l.split()[0] for l in table] == ["label", "Process", "OOM", "Process"], r.stderr
    got = rows(out)
    assert [g["label"] for g in got] == ["Process start", "OOM", "Process end"]
    start, oom, end = got
    assert (start["allocated_bytes"], start["reserved_bytes"], start["peak_bytes"]) == ("0", "0", "0")
    assert oom["oom_requested_bytes"] == str(1 << 40)
    # the end row: torch's values at exit, the script's own, and a verdict naming what holds them
    assert (int(end["allocated_bytes"]), int(end["reserved_bytes"]), int(end["peak_bytes"])) == (
        allocated, reserved, peak)
    assert end["verdict"] == "held" and end["top_holder"].startswith("kept"), end
    assert "✗ Process end" in r.stderr


def test_run_signal_death_is_128_plus_n(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, *python(
        """
        gpu.init_cuda()
        gpu.alloc(0, 10 * 1024 * 1024)
        import gputop, time
        while gputop.status().get("marks_sent", 0) < 1:   # the Process start row is out
            time.sleep(0.01)
        os.kill(os.getpid(), 9)
        """))
    assert r.returncode == 128 + 9, r.stderr
    assert "killed by signal 9 (SIGKILL)" in r.stderr
    # no Process end from a killed process, its start row is kept
    assert "Process start" in r.stderr and "Process end" not in r.stderr


def test_run_command_not_found(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, "no-such-command-gputop", "x")
    assert r.returncode == 127
    assert "gputop run: no-such-command-gputop: command not found in $PATH" in r.stderr


def test_run_python_exiting_at_once(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, sys.executable, "-c", "raise SystemExit(7)")
    assert r.returncode == 7, r.stderr
    assert "exited with code 7" in r.stderr
    assert "no agent attached: Python ran (1 process(es)) but none imported torch, jax or cupy" in r.stderr


def test_run_not_python(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, "sh", "-c", "echo hello; exit 4")
    assert r.returncode == 4 and r.stdout == "hello\n"
    assert "no agent attached: no Python process ran under CMD" in r.stderr


def test_run_script_that_attaches_itself_has_one_agent(gputop_bin: str, tmp_path: Path) -> None:
    rec = tmp_path / "r.ndjson"
    r = gputop_run(gputop_bin, *python(
        """
        import gputop
        gputop.attach(rate_hz=50)
        gpu.init_cuda()
        gpu.alloc(0, 4 * 1024 * 1024)
        gputop.snapshot("Training start")
        """), flags=("--source", "agent", "--record", str(rec)))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in rec.read_text().splitlines()]
    hellos = {l["pid"] for l in lines if l.get("type") == "hello"}
    assert len(hellos) == 1, hellos
    labels = [l["label"] for l in lines if l.get("type") == "snapshot"]
    assert labels == ["Process start", "Training start", "Process end"], labels
    # the script's own rate stands: run did not attach a second time over it
    assert {l["rate_hz"] for l in lines if l.get("type") == "hello"} == {50}


def test_run_history_records_from_the_first_allocation(gputop_bin: str, tmp_path: Path) -> None:
    """gputop run --history N (issue #29): torch's history is turned on
    inside its lazy CUDA init, before the first allocation, so an OOM's
    dump gives the first 8 GiB block the stack that allocated it."""
    code = FAKE_GPU_PRELUDE.replace("FakeGPU(1)", "FakeGPU(1, initialised=0)") + textwrap.dedent(
        """
        import json, pickle, gputop
        import time
        gpu.init_cuda()                          # torch's lazy init: the agent attaches here
        first = gpu.block(0, 8 << 30)            # FIRST_BLOCK
        t0 = time.monotonic()                    # connected, as a run is long before its OOM
        while not gputop.status()["connected"] and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        rest = [gpu.block(0, 8 << 30) for _ in range(16)]
        gpu.oom(0, 8 << 30)                      # the dump is on disk when the observer returns
        path = gputop.status()["dumps"]["written"][0]
        blocks = {b["address"]: b for s in pickle.load(open(path, "rb"))["segments"] for b in s["blocks"]}
        print(json.dumps({"first": blocks[first]["frames"][:1], "rest": all(blocks[a]["frames"] for a in rest),
                          "calls": gpu.memory.calls}))
        """)
    r = gputop_run(gputop_bin, sys.executable, "-c", code, flags=("--source", "agent", "--history", "1000"),
                   env=run_env(GPUTOP_DUMP_DIR=str(tmp_path / "dumps")))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert [c["max_entries"] for c in got["calls"]] == [1000]
    line = next(i for i, l in enumerate(code.splitlines(), 1) if "FIRST_BLOCK" in l)
    assert [(f["filename"], f["line"]) for f in got["first"]] == [("<string>", line)], got
    assert got["rest"]
    assert "memory dump at \"OOM\"" in r.stderr and "torch " in r.stderr.split("memory dump at")[1]


def test_run_chains_to_a_sitecustomize_in_a_read_only_pythonpath_dir(gputop_bin: str, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "sitecustomize.py").write_text("import sys\nprint('user sitecustomize ran', file=sys.stderr)\n")
    ro.chmod(0o555)
    try:
        r = gputop_run(gputop_bin, *python(
            """
            gpu.init_cuda()
            gpu.alloc(0, 1024 * 1024)
            print(sorted(p for p in sys.path if 'gputop-run-' in p))
            sys.exit(5)
            """), env=run_env(PYTHONPATH=str(ro)))
    finally:
        ro.chmod(0o755)
    assert r.returncode == 5, r.stderr
    assert "user sitecustomize ran" in r.stderr
    assert "agent attached in 1 process(es)" in r.stderr
    # the private directory is not on the script's sys.path
    assert r.stdout == "[]\n"
    # nothing was written into the user's directory
    assert sorted(p.name for p in ro.iterdir()) == ["sitecustomize.py"]


def test_run_without_a_private_directory_still_runs_cmd(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, sys.executable, "-c", "print('ran'); raise SystemExit(6)",
                   env=run_env(TMPDIR="/dev/null/nowhere"))
    assert r.returncode == 6 and r.stdout == "ran\n"
    assert "cannot make a private directory for the agent's sitecustomize" in r.stderr
    assert "CMD runs without the agent" in r.stderr


def test_run_with_gputop_off(gputop_bin: str, tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    r = gputop_run(gputop_bin, sys.executable, "-c", textwrap.dedent(
        """
        import sys, torch
        print("trained", "gputop" in sys.modules, [p for p in sys.path if "gputop-run-" in p])
        sys.exit(2)
        """), flags=("--source", "all", "--csv", str(out)), env=run_env(GPUTOP="0"))
    assert r.returncode == 2 and r.stdout == "trained False []\n", r.stderr
    assert "GPUTOP=0: the agent is off; CMD runs without it (NVML only)" in r.stderr
    assert "agent attached" not in r.stderr


def test_run_finds_the_agent_installed_beside_the_binary(gputop_bin: str, tmp_path: Path) -> None:
    """A prefix with bin/gputop and lib/python3.X/site-packages/gputop, as
    pip installs both halves: no GPUTOP_AGENT_PATH needed."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    site = prefix / "lib" / f"python3.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True)
    shutil.copytree(AGENT / "gputop", site / "gputop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(gputop_bin, prefix / "bin" / "gputop")
    env = run_env()
    del env["GPUTOP_AGENT_PATH"]
    r = subprocess.run([str(prefix / "bin" / "gputop"), "run", "--no-tui", "--source", "agent", "--",
                        *python("""
                        gpu.init_cuda()
                        gpu.alloc(0, 1024 * 1024)
                        import gputop
                        print(gputop.__file__)
                        """)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(site / "gputop" / "__init__.py")
    assert "agent attached in 1 process(es)" in r.stderr


def test_run_torchrun_every_rank_attaches(gputop_bin: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(PRELUDE + textwrap.dedent(
        """
        gpu.init_cuda()
        gpu.alloc(0, (1 + int(os.environ["RANK"])) * 1024 * 1024)
        # one write per line: print writes its parts apart, and the two
        # ranks share one pipe
        os.write(1, f"rank {os.environ['RANK']} done\\n".encode())
        """))
    out = tmp_path / "s.csv"
    r = gputop_run(gputop_bin, sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                   "--master-port", "0", str(script), flags=("--source", "agent", "--csv", str(out)),
                   timeout=240)
    assert r.returncode == 0, r.stderr
    assert sorted(l for l in r.stdout.splitlines() if l.startswith("rank")) == ["rank 0 done", "rank 1 done"]
    # both ranks, and not the launcher (it imports torch but never uses CUDA)
    assert "agent attached in 2 process(es)" in r.stderr, r.stderr
    got = rows(out)
    starts = [g for g in got if g["label"] == "Process start"]
    ends = {g["pid"]: g for g in got if g["label"] == "Process end"}
    assert len(starts) == 2 and len(ends) == 2
    assert sorted(int(e["allocated_bytes"]) for e in ends.values()) == [1 * MiB, 2 * MiB]


# ---- the TUI, in a real terminal ----

needs_tmux = pytest.mark.skipif(not shutil.which("tmux") and not os.environ.get("CI"),
                                reason="tmux not installed")


def wait_file(p: Path, secs: float = 30) -> str:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if p.exists() and p.read_text().endswith("\n"):
            return p.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{p} was never written")


@needs_tmux
def test_run_tui_shows_output_and_how_cmd_ended(gputop_bin: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(PRELUDE + textwrap.dedent(
        """
        import signal, time
        def stop(*_):
            print("got SIGINT, stopping", flush=True)
            sys.exit(9)
        signal.signal(signal.SIGINT, stop)
        gpu.init_cuda()
        gpu.alloc(0, 64 * 1024 * 1024)
        for i in range(60):
            print("epoch", i, flush=True)
        print("waiting for ctrl-c", flush=True)
        while True:
            time.sleep(0.05)
        """))
    rc = tmp_path / "rc"
    t = Tmux(f"{gputop_bin} run --source agent -- {sys.executable} {script}; "
             f"echo $? > {rc}; sleep 60", run_env())
    try:
        s = t.wait_for("waiting for ctrl-c")
        assert "epoch 59" in s and "running (pid" in s
        t.wait_for("Process start")            # the agent's row in the summary
        t.keys("K")                            # scroll back one line
        s = t.wait_for("(scrolled back)")
        assert "waiting for ctrl-c" not in s and "epoch 59" in s
        t.keys("J")
        t.keys("O")                            # hide the output
        s = t.wait_for("O show output")
        assert "epoch 59" not in s
        t.keys("O")
        t.keys("C-c")                          # the first Ctrl-C is the command's
        s = t.wait_for("exited with code 9")
        assert "got SIGINT, stopping" in s
        assert not rc.exists()                 # the TUI stays until q
        t.keys("q")
        assert wait_file(rc) == "9\n"
    finally:
        t.close()


@needs_tmux
def test_run_tui_second_ctrl_c_quits(gputop_bin: str, tmp_path: Path) -> None:
    rc = tmp_path / "rc"
    # what it prints once SIGINT is ignored is not in its command line,
    # which the title bar shows from the start
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('SIGINT', 'ignored', flush=True); time.sleep(600)"
    t = Tmux(f"{gputop_bin} run --source agent -- {sys.executable} -c \"{code}\"; "
             f"echo $? > {rc}; sleep 60", run_env())
    try:
        t.wait_for("SIGINT ignored")
        t.keys("C-c")
        t.wait_for("Ctrl-C again quits gputop")
        t.keys("C-c")
        # gputop quit; the command, which ignored SIGINT, got SIGHUP as its terminal closed
        assert wait_file(rc) == f"{128 + signal.SIGHUP}\n"
    finally:
        t.close()


@pytest.mark.parametrize("how", ["python -m", "accelerate launch"])
def test_run_module_and_accelerate_launch(gputop_bin: str, tmp_path: Path, how: str) -> None:
    (tmp_path / "train.py").write_text(PRELUDE + textwrap.dedent(
        """
        gpu.init_cuda()
        gpu.alloc(0, 3 * 1024 * 1024)
        print("trained in", os.getpid(), flush=True)
        """))
    if how == "python -m":
        cmd = [sys.executable, "-m", "train"]
    else:
        _need("accelerate")
        cmd = [str(Path(sys.executable).parent / "accelerate"), "launch", "--cpu", "--num_processes", "1",
               "train.py"]
    r = subprocess.run([gputop_bin, "run", "--no-tui", "--source", "agent", "--", *cmd], cwd=tmp_path,
                       env=run_env(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    pid = [l.split()[-1] for l in r.stdout.splitlines() if l.startswith("trained in")]
    # the training process attached, and only it (not accelerate's launcher)
    assert f"agent attached in 1 process(es): pid {pid[0]}" in r.stderr, r.stderr
    assert "Process start" in r.stderr and "Process end" in r.stderr


def test_run_history_turns_it_on_and_dumps_go_beside_the_recording(gputop_bin: str, tmp_path: Path) -> None:
    rec, out = tmp_path / "run.gputop", tmp_path / "s.csv"
    r = gputop_run(gputop_bin, *python(
        """
        gpu.init_cuda()
        import gputop, time
        for _ in range(100):                  # the agent thread turns history on once it sees CUDA
            if (gputop.status().get("history") or {}).get("max_entries"):
                break
            time.sleep(0.05)
        print("history:", gputop.status()["history"]["max_entries"], flush=True)
        gpu.alloc(0, 8 * 1024 * 1024)
        gpu.oom(0, 1 << 40)
        """), flags=("--source", "agent", "--history", "500", "--record", str(rec), "--csv", str(out)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "history: 500", r.stdout
    oom = [g for g in rows(out) if g["label"] == "OOM"]
    assert len(oom) == 1 and oom[0]["dump"], rows(out)
    dump = Path(oom[0]["dump"])
    assert dump.parent.parent == Path(str(rec) + ".dumps") or dump.parent == Path(str(rec) + ".dumps"), dump
    assert dump.is_file() and dump.stat().st_size > 0


def test_run_history_must_be_a_count(gputop_bin: str) -> None:
    r = gputop_run(gputop_bin, "true", flags=("--history", "-1"))
    assert r.returncode == 2 and "--history -1" in r.stderr, r.stderr
