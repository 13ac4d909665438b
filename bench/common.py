"""Helpers shared by the H200 benchmark scripts."""

from __future__ import annotations

import json
import os
import signal
import subprocess


def stop_proc(p: subprocess.Popen | None, sig: int = signal.SIGINT) -> None:
    """Ask a child to stop (SIGINT: gputop record closes its file cleanly),
    then kill it if it has not gone within 5 s."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(sig)
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def write_result(d: str | None, name: str, status: str, summary: str, **kw) -> None:
    """Print one check's outcome and, with a results dir, keep it as NAME.json
    for scripts/gpu-check.sh's table."""
    print(f"{name}: {status}: {summary}")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".json"), "w") as fh:
            json.dump({"status": status, "summary": summary, **kw}, fh, indent=1)
