"""`gputop status --json` (the real binary) against docs/status.schema.json,
validated with the jsonschema package: a running `gputop serve --source
agent`, a fake agent on its real socket whose frames the agent's own
encoder (_wire) writes (counters, a layout reading, rows with a ledger and
a limit, an end row with its holders walk, an OOM), and the report's
figures checked against what was sent. Without a running gputop and
without NVML (no driver here) the command fails with exit 1 and says why."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO

from gputop import _wire

GiB = 1 << 30
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


def validate(doc: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)


def test_the_schema_is_a_valid_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def status(gputop_bin: str, sock: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([gputop_bin, "status", "--socket", sock, *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def serve(gputop_bin: str, tmp_path: Path):
    sock = str(tmp_path / "s.sock")
    log = open(tmp_path / "serve.log", "w")
    srv = subprocess.Popen([gputop_bin, "serve", "--source", "agent", "--socket", sock], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            assert srv.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.02)
        yield sock
    finally:
        srv.terminate()
        assert srv.wait(20) == 0, (tmp_path / "serve.log").read_text()
        log.close()


def test_status_json_of_a_running_gputop(gputop_bin: str, serve: str):
    t = time.time_ns()
    frames = [
        {"type": "hello", "v": 1, "pid": 4343, "argv": ["train.py"], "torch": "2.11.0",
         "devices": [{"index": 0, "uuid": "GPU-py-0", "name": "Fake GPU", "total": 80 * GiB}], "t": t},
        {"type": "sample", "t": t + 1, "dev": 0, "allocated": 3 * GiB, "reserved": 4 * GiB, "peak": 5 * GiB,
         "inactive": 12345, "ooms": 1},
        {"type": "layout", "dev": 0, "t": t + 2, "segments": 5, "blocks": 9, "reserved": 4 * GiB,
         "allocated": 3 * GiB, "free_in_segments": GiB, "largest_free": GiB // 4},
        {"type": "mark", "t": t + 3, "label": "Training start", "devs": [
            {"dev": 0, "allocated": 3 * GiB, "reserved": 4 * GiB, "peak": 5 * GiB, "limit": 40 * GiB,
             "ledger": {"t": t + 3, "allocated": 3 * GiB, "reserved": 4 * GiB, "params": GiB, "grads": GiB,
                        "optimizer": GiB // 2, "activations": 0, "other_tensors": 0, "workspace": 0}}]},
        {"type": "mark", "t": t + 4, "label": "After cleanup", "devs": [
            {"dev": 0, "allocated": 0, "reserved": 4 * GiB, "peak": 5 * GiB,
             "held": {"t": t + 4, "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0}}]},
        {"type": "oom", "t": t + 5, "dev": 0, "requested": 2 * GiB, "free": GiB // 2, "limit": 40 * GiB,
         "allocated": 30 * GiB, "reserved": 39 * GiB, "peak": 39 * GiB},
    ]
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(serve)
        s.sendall(b"".join(_wire.encode(f) for f in frames))
        deadline = time.monotonic() + 15
        while True:
            r = status(gputop_bin, serve, "--json")
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            if doc["ooms"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        validate(doc)

        assert (doc["version"], doc["source"], doc["socket"]) == (1, "gputop", serve)
        assert doc["devices"] == [{"index": 0, "uuid": "GPU-py-0", "name": "Fake GPU", "from": "agent", "total": 80 * GiB}]
        assert doc["processes"] == [] and doc["processes_why"]
        [agent] = doc["agents"]
        assert (agent["pid"], agent["name"], agent["torch"], agent["connected"]) == (4343, "train.py", "2.11.0", True)
        [dev] = agent["devices"]
        assert {k: dev[k] for k in ("dev", "torch_dev", "t", "allocated", "reserved", "peak", "inactive",
                                     "alloc_retries", "ooms", "limit")} == {
            "dev": 0, "torch_dev": 0, "t": t + 1, "allocated": 3 * GiB, "reserved": 4 * GiB, "peak": 5 * GiB,
            "inactive": 12345, "alloc_retries": 0, "ooms": 1, "limit": 40 * GiB}
        assert dev["layout"] == {"t": t + 2, "segments": 5, "blocks": 9, "reserved": 4 * GiB, "allocated": 3 * GiB,
                                 "free_in_segments": GiB, "largest_free": GiB // 4, "fragmentation": 0.75}
        start, end, oom_row = doc["rows"]
        assert dev["ledger"]["row"] == start["id"] and dev["ledger"]["t"] == t + 3
        parts = {p["name"]: p.get("bytes", p.get("why")) for p in dev["ledger"]["parts"]}
        assert parts == {"params": GiB, "grads": GiB, "optimizer": GiB // 2, "activations": 0, "other_tensors": 0,
                         "workspace": 0, "unattributed": GiB // 2, "cached_free": GiB,
                         "outside_torch": "NVML gave no figure for the process at the walk"}
        assert (start["label"], start["allocated"], start["limit"], "verdict" in start) == (
            "Training start", 3 * GiB, 40 * GiB, False)
        assert (end["label"], end["end"], end["allocated"]) == ("After cleanup", True, 0)
        assert (end["verdict"]["status"], end["verdict"]["mark"]) == ("released", "✓")
        assert (oom_row["source"], oom_row["kind"], oom_row["allocated"]) == ("oom", "oom", 30 * GiB)
        [oom] = doc["ooms"]
        assert {k: oom[k] for k in ("row", "t", "dev", "pid", "requested", "free", "limit", "allocated", "reserved", "peak")} == {
            "row": oom_row["id"], "t": t + 5, "dev": 0, "pid": 4343, "requested": 2 * GiB, "free": GiB // 2,
            "limit": 40 * GiB, "allocated": 30 * GiB, "reserved": 39 * GiB, "peak": 39 * GiB}
        assert oom["explanation"]["asked"] == "asked for 2.00 GiB, 512.0 MiB free on the GPU (CUDA)."
        assert "set_per_process_memory_fraction" in oom["explanation"]["cause"]

        # a field the schema does not know fails validation: the check bites
        bad = dict(doc, extra=1)
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)


def test_status_without_gputop_or_nvml(gputop_bin: str, tmp_path: Path):
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver")
    r = status(gputop_bin, str(tmp_path / "none.sock"), "--json")
    assert r.returncode == 1 and r.stdout == ""
    assert "no gputop is running" in r.stderr and "NVML cannot be read" in r.stderr


def doc_blocks(lang: str) -> list[str]:
    import re

    text = (REPO / "docs" / "status.md").read_text()
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, re.M | re.S)


def test_the_docs_example_is_valid():
    [example] = doc_blocks("json")
    validate(json.loads(example))


def test_the_docs_python_snippet_waits_for_allocated_to_drop(gputop_bin: str, serve: str, tmp_path: Path):
    [snippet] = doc_blocks("python")
    script = tmp_path / "wait_allocated.py"
    script.write_text(snippet)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gputop").symlink_to(gputop_bin)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", GPUTOP_SOCKET=serve)
    t = time.time_ns()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(serve)
        s.sendall(_wire.encode({"type": "hello", "v": 1, "pid": 4444, "argv": ["train.py"],
                                "devices": [{"index": 0, "uuid": "GPU-py-0", "name": "Fake GPU"}], "t": t}))
        s.sendall(_wire.encode({"type": "sample", "t": t + 1, "dev": 0, "allocated": 3 * GiB, "reserved": 4 * GiB, "peak": 3 * GiB}))
        # the agent is known before the script starts: it must wait, not
        # find no agent
        deadline = time.monotonic() + 15
        while not json.loads(status(gputop_bin, serve, "--json").stdout)["agents"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc = subprocess.Popen([sys.executable, str(script), "4444", str(GiB)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            assert proc.poll() is None, proc.communicate()  # 3 GiB is not under 1 GiB: still waiting
            s.sendall(_wire.encode({"type": "sample", "t": t + 2, "dev": 0, "allocated": GiB // 2,
                                    "reserved": 4 * GiB, "peak": 3 * GiB}))
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == f"pid 4444: {GiB // 2} bytes allocated\n"
