"""`gputop fit`: the real binary runs fake training children (the real
agent over the fake GPU, injected as `gputop run` injects it, the
allocator capped through GPUTOP_MEMORY_CAP), one per value; their peak is
a known function of the value, which the fit must recover with the limit.
Bad commands, a child that never stabilises and one that ignores signals
are reported as such."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import FAKE_GPU_PRELUDE
from test_run import run_env

_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
_need("torch")

MiB = 1 << 20

# A training loop on the fake GPU: A of parameters and optimizer state,
# then steps of 60 ms whose activations are B per unit of the value (the
# peak: A + B × value, plus BUMP at one value), the allocated bytes rising
# and falling each step as a real loop's do. The value 20's child also
# makes a row each step (gputop.snapshot). argv: VALUE [ignore-signals |
# leak].
CHILD = FAKE_GPU_PRELUDE + textwrap.dedent(
    """
    import signal, time
    import gputop
    A, B, BUMP = 100 * 2**20, 10 * 2**20, {20: 2 * 2**20}
    v = int(sys.argv[1])
    how = sys.argv[2] if len(sys.argv) > 2 else ""
    if how == "ignore-signals":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    gpu.init_cuda()
    gpu.alloc(0, A)
    act = B * v + BUMP.get(v, 0)
    for step in range(100000):
        gpu.alloc(0, act)
        time.sleep(0.03)
        gpu.free(0, act)
        if how == "leak":
            gpu.alloc(0, 2 * 2**20)
        if v == 20:
            gputop.snapshot(f"step {step}")
        time.sleep(0.03)
    """)


@pytest.fixture
def child(tmp_path: Path) -> Path:
    p = tmp_path / "train.py"
    p.write_text(CHILD)
    return p


def fit(gputop_bin: str, *args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([gputop_bin, "fit", *args], env=env or run_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_fit_recovers_the_function_and_the_limit(gputop_bin: str, child: Path, tmp_path: Path) -> None:
    out = tmp_path / "fit.json"
    # --stop-seconds 30: a loaded machine may take more than the default 5 s
    # to run a child's exit after its SIGINT; which signal stopped it is
    # what is checked here, not how fast
    r = fit(gputop_bin, "--values", "10,20,30,60", "--memory", "505MiB", "--margin", "0", "--step", "1",
            "--stop-seconds", "30", "--verify", "--json", str(out), "--", sys.executable, str(child), "{}")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    runs = {x["value"]: x for x in rep["runs"]}
    assert [runs[v]["status"] for v in (10, 20, 30, 60)] == ["fit", "fit", "fit", "oom"], r.stdout
    # each measured peak is the child's, to the byte
    for v in (10, 20, 30):
        assert runs[v]["peak_bytes"] == 100 * MiB + 10 * MiB * v + (2 * MiB if v == 20 else 0), runs[v]
        assert runs[v]["why"].startswith("the peak held for") and runs[v]["ended"] == "stopped with SIGINT"
        assert runs[v]["steps"] >= 5 and runs[v]["limit_bytes"] == 505 * MiB
    # 60 ran out of memory at the cap, fast: its first step asked for 600 MiB
    oom = runs[60]["oom"]
    assert oom == {"requested_bytes": 600 * MiB, "allocated_bytes": 100 * MiB, "limit_bytes": 505 * MiB}
    # the line: least squares through (10, 200), (20, 302), (30, 400) MiB
    m = rep["model"]
    assert m["points"] == 3 and m["error_measured"]
    assert abs(m["per_value_bytes"] - 10 * MiB) < 1
    assert abs(m["flat_bytes"] - (100 * MiB + 2 * MiB / 3)) < 1
    at = lambda v: m["flat_bytes"] + m["per_value_bytes"] * v  # noqa: E731
    worst = max(abs(runs[v]["peak_bytes"] - at(v)) / runs[v]["peak_bytes"] for v in (10, 20, 30))
    assert abs(m["max_error"] - worst) < 1e-9 and abs(m["max_error_bytes"] - 4 * MiB / 3) < 1
    # the limit: 40 (500.7 MiB predicted, 500 real) fits 505 MiB, 41 (510) does not
    p = rep["prediction"]
    assert p["value"] == 40 and p["budget_bytes"] == 505 * MiB, p
    assert p["limited_by"] == "activations and temporaries (no ledger at the rows)"
    assert [(x["value"], x["status"]) for x in rep["verify"]] == [(40, "fit"), (41, "oom")]
    assert rep["verify"][0]["peak_bytes"] == 500 * MiB
    # the table says the same
    text = r.stdout
    assert "largest value predicted to fit: 40 (peak 500.7 MiB of 505.0 MiB" in text, text
    assert "model: peak = 100.7 MiB + 10.0 MiB × value, from 3 values" in text
    assert "model error on the measured values: at most 0.442% (1.3 MiB)" in text
    assert "40 fit, as predicted" in text and "41 ran out of memory, as predicted" in text
    assert "gputop fit: 60: oom" in r.stderr


@pytest.mark.parametrize("how", ["ignore-signals", "leak"])
def test_fit_a_child_that_ignores_signals_or_never_stabilises(gputop_bin: str, child: Path, how: str) -> None:
    # a second for each signal to the child that ignores them; the other
    # has the default five to exit cleanly (its agent's last row, its bye)
    stop = "1" if how == "ignore-signals" else "5"
    r = fit(gputop_bin, "--values", "3", "--memory", "1GiB", "--stop-seconds", stop, "--max-seconds", "20",
            "--stable-steps", "3", "--stable-seconds", "0", "--json", "-", "--", sys.executable, str(child), "{}", how)
    # one value: no line to fit, said; exit 1
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["no_prediction"] == "fewer than two values were measured: a line needs two"
    run = rep["runs"][0]
    if how == "ignore-signals":
        # measured all the same, and killed
        assert run["status"] == "fit" and run["peak_bytes"] == 130 * MiB, run
        assert run["ended"] == "killed with SIGKILL (it ignored SIGINT and SIGTERM, 1s each)", run
    else:
        assert run["status"] == "unstable", run
        assert run["why"].startswith("the peak still rose at --max-seconds 20"), run
        assert run["ended"] == "stopped with SIGINT"
        assert run["peak_bytes"] > 130 * MiB


def test_fit_commands_that_fail(gputop_bin: str, tmp_path: Path) -> None:
    r = fit(gputop_bin, "--values", "1,2,3", "--", "no-such-command-gputop", "{}")
    assert r.returncode == 1
    # two values fail the same way: the third is not tried
    assert r.stdout.count("no-such-command-gputop: command not found in $PATH") == 3, r.stdout
    assert "3  skipped" in r.stdout and "the two values before (1, 2) failed the same way" in r.stdout
    assert "no prediction: fewer than two values were measured" in r.stdout
    # not Python: it runs, ends, and nothing attached; its last lines are shown
    r = fit(gputop_bin, "--values", "4", "--", "sh", "-c", "echo 'value {} \x1b[31mfailed'; exit 3")
    assert r.returncode == 1
    assert "it exited with code 3" in r.stdout, r.stdout
    assert "value 4's last lines of output:\n  | value 4 failed" in r.stdout
    assert "\x1b" not in r.stdout


def test_fit_interrupted_reports_what_it_ran(gputop_bin: str) -> None:
    p = subprocess.Popen([gputop_bin, "fit", "--values", "1,2", "--", "sh", "-c", "sleep {}0"], env=run_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "interrupted: the report covers the values run until then" in err
    lines = [l for l in out.splitlines() if l.lstrip().startswith(("1 ", "2 "))]
    assert len(lines) == 1 and "interrupted" in lines[0] and "stopped with SIGINT" in lines[0], out


@pytest.mark.parametrize("args, want", [
    (["--values", "16,32", "--", "python", "train.py", "--batch-size"], "has no {}: put {} where each value goes"),
    (["--values", "16,32"], "want a command"),
    (["--", "python", "t.py", "{}"], "--values is missing"),
    (["--values", "16,x", "--", "python", "t.py", "{}"], '"x" (value 2) is not a whole number'),
    (["--values", "", "--", "python", "t.py", "{}"], "--values is empty"),
    (["--values", "16", "--memory", "lots", "--", "python", "t.py", "{}"], '--memory: "lots" is not a memory size'),
    (["--values", "16", "--margin", "60", "--", "python", "t.py", "{}"], "--margin 60"),
    (["--values", "16", "--stable-steps", "0", "--stable-seconds", "0", "--", "python", "t.py", "{}"],
     "the peak could never be stable"),
])
def test_fit_usage_errors(gputop_bin: str, args: list[str], want: str) -> None:
    r = fit(gputop_bin, *args)
    assert r.returncode == 2 and want in r.stderr, r.stderr
    assert r.stdout == ""


def test_fit_refuses_with_the_agent_off(gputop_bin: str) -> None:
    r = fit(gputop_bin, "--values", "1,2", "--", "python", "t.py", "{}", env=run_env(GPUTOP="0"))
    assert r.returncode == 2 and "GPUTOP=0 turns the agent off" in r.stderr
