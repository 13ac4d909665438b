"""The Python agent's rank reaches Prometheus: `gputop serve --source agent
--metrics` (the real binary), the real socket, tests/child.py (the real
gputop package over the fake allocator) started as torchrun starts a
worker (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID), and the
endpoint's text checked against what the child's snapshot() returned."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from test_e2e import Child

MiB = 1 << 20
LINE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = []
    for ln in text.splitlines():
        m = LINE.match(ln)
        if m:
            out.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))), float(m.group(3))))
    return out


def test_ranked_agent_on_the_endpoint(gputop_bin: str, tmp_path: Path, sock_path: str, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    log = open(tmp_path / "serve.log", "w")
    srv = subprocess.Popen([gputop_bin, "serve", "--source", "agent", "--socket", sock_path, "--metrics", addr],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(sock_path):
            assert srv.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.02)
        for k, v in {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "none-7",
                     "SLURM_JOB_ID": "4242"}.items():
            monkeypatch.setenv(k, v)
        child = Child(sock_path, tmp_path / "child.log")
        try:
            child("attach 100")
            child(f"alloc 0 {300 * MiB + 512}")
            vals = child("snap after alloc")["values"]["0"]
            assert child("wait_samples 5 10")["ok"]
            want = {"gputop_torch_allocated_bytes": vals["allocated"],
                    "gputop_torch_reserved_bytes": vals["reserved"],
                    "gputop_torch_peak_allocated_bytes": vals["peak"],
                    "gputop_torch_inactive_split_bytes": vals["inactive"]}
            assert vals["allocated"] == 300 * MiB + 512  # the fake rounds as torch does
            got: dict[str, object] = {}
            labels: dict[str, str] = {}
            deadline = time.monotonic() + 15
            while got != want and time.monotonic() < deadline:
                got = {}
                for name, lab, v in scrape(f"http://{addr}/metrics"):
                    if name in want and lab.get("pid") == str(child.pid):
                        got[name], labels = int(v), lab
                time.sleep(0.1)
            assert got == want
            assert {k: labels[k] for k in ("rank", "local_rank", "job_id", "pid")} == {
                "rank": "5", "local_rank": "1", "job_id": "none-7", "pid": str(child.pid)}
            assert labels["UUID"].startswith("GPU-") and labels["gpu"] == "0"
        finally:
            child.kill()
    finally:
        srv.terminate()
        assert srv.wait(20) == 0, (tmp_path / "serve.log").read_text()
        log.close()
