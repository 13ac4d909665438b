"""Helpers shared by the H200 benchmark scripts."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time


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


def start_gputop(binary: str, rec: str, sock: str, source: str, log) -> subprocess.Popen | None:
    """`gputop record` writing rec and listening on sock, once the socket is
    there; None (and why, in log) when it exited instead."""
    cmd = [binary, "record", "-o", rec, "--socket", sock, "--source", source]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    if p.poll() is not None:
        log.write(f"gputop record exited with {p.returncode}\n")
        return None
    return p


def thread_cpu_ns(tid: int | None) -> int | None:
    """CPU time of one thread of this process, in ns (schedstat's first
    field), or None where the kernel does not say."""
    if not tid:
        return None
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def write_result(d: str | None, name: str, status: str, summary: str, **kw) -> None:
    """Print one check's outcome and, with a results dir, keep it as NAME.json
    for scripts/gpu-check.sh's table."""
    print(f"{name}: {status}: {summary}")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".json"), "w") as fh:
            json.dump({"status": status, "summary": summary, **kw}, fh, indent=1)


def check_args(doc: str, name: str, workdir_holds: str) -> argparse.Namespace:
    """The options of a check that runs beside `gputop record`: the binary,
    where results go, the result's name, and a work dir for what it holds."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default=name)
    ap.add_argument("--workdir", help=f"for {workdir_holds} (default: a temp dir)")
    return ap.parse_args()


def work_dir(a: argparse.Namespace, tag: str) -> str:
    """--workdir, made if need be, else a new temp dir named for tag."""
    work = a.workdir or tempfile.mkdtemp(prefix=f"gputop-{tag}.")
    os.makedirs(work, exist_ok=True)
    return work
