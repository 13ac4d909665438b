"""A training process for the verdict tests: the real gputop package over
the fake allocator, one scenario of what can be left after a run, chosen by
argv[1]. CPU tensors stand for CUDA tensors (GPUTOP_HOLDERS_DEVICE=cpu, and
fakegpu gives their storages blocks), so the end rows' holders walks run
for real. Prints one JSON line (what the scenario's calls returned), then
"ready", then waits for stdin to close unless argv[2] is "exit".
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import gputop  # noqa: E402
from fakegpu import CUBLAS_WORKSPACE, CUBLASLT_WORKSPACE, MiB, FakeGPU  # noqa: E402

gpu = FakeGPU(1)
gpu.install()
gputop.attach(rate_hz=50)
out: dict = {"pid": os.getpid()}


def tensor(mib: float) -> torch.Tensor:
    """A tensor of mib MiB on the pretend GPU."""
    t = torch.empty(int(mib * MiB) // 4, dtype=torch.float32)
    gpu.tensor_block(0, t)
    return t


def train() -> None:
    """What a first matmul leaves: cuBLAS workspaces for the main and the
    autograd thread, and a cuBLASLt one."""
    gpu.workspace(0)
    gpu.workspace(0)
    gpu.workspace(0, CUBLASLT_WORKSPACE)


def article() -> None:
    # the article's own cleanup: the model is gone, the workspaces stay
    gputop.snapshot("Training start")
    model = [tensor(12)]
    train()
    gputop.snapshot("Training end")
    for t in model:
        gpu.free_block(0, t.untyped_storage().data_ptr())
    del model
    out["article"] = gputop.snapshot("After cleanup")[0]["held"]
    # gputop's cleanup frees them (its line to stderr: stdout is the answer)
    with contextlib.redirect_stdout(sys.stderr):
        r = gputop.cleanup()
    out["steps"] = r["steps"]
    out["after"] = r["after"][0]["allocated"]


kept = None


def kept_tensor() -> None:
    # Training start with the model already on the GPU (400 MiB); the model
    # deleted, 100 MiB kept in a global: below the baseline, still a leak
    global kept
    model = tensor(400)
    gputop.snapshot("Training start")
    kept = tensor(100)
    gpu.free_block(0, model.untyped_storage().data_ptr())
    del model
    out["held"] = gputop.snapshot("After cleanup")[0]["held"]
    gputop.snapshot("Epoch 1")  # a row after the end row


class Hostile:
    """Raises on every attribute it has (and on the ones it has not)."""

    @property
    def weights(self) -> torch.Tensor:
        raise RuntimeError("no")

    def __getattr__(self, name: str) -> None:
        raise ValueError(name)


hostile = None


def raising() -> None:
    global hostile, kept
    hostile = Hostile()
    kept = tensor(8)
    out["held"] = gputop.snapshot("After cleanup")[0]["held"]


def slow() -> None:
    from gputop import _holders

    global kept
    kept = tensor(8)
    _holders.WALK_LIMIT_S = 0.0  # every walk is past its limit
    out["held"] = gputop.snapshot("After cleanup")[0]["held"]


def off() -> None:
    global kept
    kept = tensor(8)
    out["held"] = gputop.snapshot("After cleanup", verdict=False)[0]["held"]


def dies_in_walk() -> None:
    # the process exits while it walks its holders for gputop's request
    from gputop import _holders

    global kept
    kept = tensor(8)
    gputop.snapshot("Training start")
    _holders.holders_report = lambda *a, **k: os._exit(3)


SCENARIOS = {"article": article, "kept": kept_tensor, "raising": raising, "slow": slow,
             "off": off, "dies_in_walk": dies_in_walk}


def main() -> None:
    SCENARIOS[sys.argv[1]]()
    ag = gputop.attach()
    deadline = time.monotonic() + 10
    while (not ag.connected or ag.status()["queued_marks"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(json.dumps(out), flush=True)
    print("ready", flush=True)
    if sys.argv[2:] != ["exit"]:
        sys.stdin.read()


if __name__ == "__main__":
    main()
