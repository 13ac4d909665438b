"""The whole loop a user sees, in a real terminal: the real gputop binary in
tmux, a real training-process stand-in with the agent attached over the real
socket (its allocator is the pretend one of fakegpu.py; its tensors are real
torch tensors on the CPU, which holders() walks with GPUTOP_HOLDERS_DEVICE=cpu).
Pressing h in gputop asks the process who holds its memory; the answer comes
back over the socket into the holders pane, and the leak verdict names it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import TESTS, Tmux, child_env

# CI installs requirements-test.txt and tmux: there a missing one fails, never skips
_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
_need("torch")
if not shutil.which("tmux"):
    if os.environ.get("CI"):
        raise RuntimeError("tmux is needed for the terminal tests")
    pytest.skip("tmux not installed", allow_module_level=True)

MiB = 1 << 20

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import torch
    import gputop
    from fakegpu import FakeGPU

    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(rate_hz=50)
    gpu.alloc(0, 100 * {mib})
    gputop.snapshot("Training start")
    model1 = torch.nn.Linear(1024, 1024)              # 4 MiB of parameters
    for p in model1.parameters():                     # on the pretend GPU
        gpu.tensor_block(0, p)
    losses = [model1(torch.randn(64, 1024)).sum() for _ in range(5)]  # graphs kept alive
    gpu.alloc(0, 300 * {mib})
    gputop.snapshot("After cleanup")                  # but nothing was released
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
    """
)


@contextlib.contextmanager
def gputop_with(gputop_bin: str, tmp_path: Path, child_code: str, **env: str) -> Iterator[tuple[Tmux, subprocess.Popen]]:
    """gputop (agent source) in a 160x50 tmux session, and a child process
    running child_code with the agent, once it has printed "ready"."""
    (tmp_path / "s").mkdir(mode=0o700)
    sock = str(tmp_path / "s" / "gputop.sock")
    term = Tmux([gputop_bin, "--source", "agent", "--socket", sock])
    child = None
    try:
        term.wait_for("agents: listening on")
        child = subprocess.Popen([sys.executable, "-c", child_code.format(tests=str(TESTS), mib=MiB)],
                                 env=child_env(GPUTOP_SOCKET=sock, **env), stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        yield term, child
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        term.close()


def test_holders_and_leak_verdict_in_the_terminal(gputop_bin: str, tmp_path: Path) -> None:
    with gputop_with(gputop_bin, tmp_path, CHILD, GPUTOP_HOLDERS_DEVICE="cpu") as (term, child):
        # the rows arrive with torch's (here: the pretend allocator's) exact values
        scr = term.wait_for("After cleanup")
        assert "Training start" in scr
        assert "100.00" in scr and "404.00" in scr, scr
        # the end row's own holders walk names what holds its memory; the
        # 400 MiB the pretend allocator gave out without a tensor are said
        # to be unaccounted for, never taken for released
        text = " ".join(scr.split())
        assert "✗ After cleanup: 4.0 MiB still held: model1 (2 tensors float32[1024, 1024])" in text, scr
        assert "400.0 MiB that nothing accounts for" in text, scr

        # h asks the process who holds its memory; the answer fills the pane
        term.keys("h")
        scr = term.wait_for("losses holds 5 loss tensors")  # the losses group's hint, in the pane alone
        assert "losses" in scr and "model1" in scr, scr

        # killed mid-run: the history stays, the process is marked as ended
        child.send_signal(signal.SIGKILL)
        child.wait(5)
        term.keys("h")  # close the holders pane
        scr = term.wait_for("killed")
        assert "After cleanup" in scr, scr


OOM_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import gputop
    from fakegpu import FakeGPU

    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(rate_hz=50)
    gpu.alloc(0, 3000 * {mib})
    t0 = time.time()
    while not gpu.source.oom_callbacks and time.time() - t0 < 10:  # registered once the agent sees the device
        time.sleep(0.01)
    gputop.snapshot("Training start")
    gpu.oom(0, 80 << 30)          # the allocator's out-of-memory observers run
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
    """
)


def test_oom_is_explained_in_the_terminal(gputop_bin: str, tmp_path: Path) -> None:
    with gputop_with(gputop_bin, tmp_path, OOM_CHILD) as (term, child):
        scr = term.wait_for("✗ OOM")
        text = " ".join(scr.split())
        assert f"in pid {child.pid}: asked for 80.00 GiB" in text, scr
        # 3000 MiB allocated in 2 MiB segments: nothing cached unused, so the
        # tensors themselves fill the GPU
        assert "torch held 2.93 GiB in tensors (allocated) and 0 B cached but unused" in text, scr
        assert "Live tensors fill the GPU" in text, scr
