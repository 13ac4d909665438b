"""bench/rec.py, the bench scripts' reader of gputop recordings, against the
Go side: the frame types and fields of wire/frames.go and recording/FORMAT.md,
the H200 recordings in testdata/ and the demo read row for row as
`gputop export` reads them, NVML figures as gputop computes them from the
same samples, and a recording the real `gputop record` wrote from frames
this test sent, sample for sample."""

from __future__ import annotations

import ast
import csv
import datetime
import inspect
import json
import os
import random
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import common  # noqa: E402
import rec  # noqa: E402

sys.path.pop(0)

RECORDINGS = sorted((REPO / "testdata" / "recordings").glob("*.gputop")) + [REPO / "demo" / "demo.gputop"]
GPU0 = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
GPU1 = "GPU-d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
U64 = 1 << 64


# ---------------------------------------------------------------- the Go side's declarations

def go_structs(*paths: Path) -> dict[str, list[tuple[str, str]]]:
    """struct name -> [(json key, Go type)] of the Go files, in field order."""
    out = {}
    for p in paths:
        for m in re.finditer(r"type (\w+) struct \{(.*?)\n\}", p.read_text(), re.S):
            out[m.group(1)] = [(fm.group(2).split(",")[0], fm.group(1))
                               for fm in re.finditer(r'^\s*\w+\s+(\S+)\s+`json:"([^"]+)"`', m.group(2), re.M)]
    return out


def go_sources() -> list[Path]:
    """wire/frames.go, wire/encode.go (the batch lines' encoder) and the
    recording package's Go files (its own frames)."""
    return [REPO / "wire" / "frames.go", REPO / "wire" / "encode.go"] + sorted(p for p in (REPO / "recording").glob("*.go")
                                                  if not p.name.endswith("_test.go"))


def go_frame_types() -> dict[str, str]:
    """Frame type -> its Go struct, from the Type constants (TypeX names struct X)."""
    out = {}
    for p in go_sources():
        for m in re.finditer(r'^\s*(?:const\s+)?Type(\w+)\s*=\s*"(\w+)"', p.read_text(), re.M):
            out[m.group(2)] = m.group(1)
    return out


def format_table() -> dict[str, list[str]]:
    """Frame type -> the fields FORMAT.md says must be present, from its table."""
    text = (REPO / "recording" / "FORMAT.md").read_text()
    section = text.split("\n## Frames\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)` \|.*\| (.*) \|$", line)
        if m:
            out[m.group(1)] = re.findall(r"`(\w+)`", m.group(2))
    return out


def frame_fields(fn) -> tuple[set[str], set[str]]:
    """The fields a decoder of rec.py reads from its frame f: (as f["x"], as f.get("x"))."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    need, may = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "f" \
                and isinstance(n.slice, ast.Constant):
            need.add(n.slice.value)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "f" and n.args \
                and isinstance(n.args[0], ast.Constant):
            may.add(n.args[0].value)
    return need, may


def test_rec_decodes_frame_types_of_the_format():
    table, go = format_table(), go_frame_types()
    assert len(table) >= 15 and "samples" in table and "dropped" in table, table
    assert "snap" in go and "dropped" in go and go["device_error"] == "DevError", go
    # rec.py decodes recorded types only; any other it counts
    assert set(rec.DECODERS) <= set(table) & set(go), set(rec.DECODERS) - (set(table) & set(go))


def test_rec_reads_the_fields_wire_defines():
    structs = go_structs(*go_sources())
    types, table = go_frame_types(), format_table()
    checked = 0
    for typ, fn in rec.DECODERS.items():
        keys = {k for k, _ in structs[types[typ]]}
        need, may = frame_fields(fn)
        assert (need | may) <= keys, f"rec.py reads {typ} fields {(need | may) - keys} that wire/frames.go lacks"
        # what the format lets a writer leave out, rec.py must not demand
        assert need <= set(table[typ]), f"rec.py demands {typ} fields {need - set(table[typ])} FORMAT.md makes optional"
        checked += len(need | may)
    assert checked >= 10
    assert {"pid", "dev", "t0", "dt"} <= frame_fields(rec._decode_samples)[0]
    # the delta-encoded lists: the batch structs' []int64 fields after dt, in
    # order, and the Go writer's own names for the sample lists
    samples = [k for k, t in structs["Samples"] if t == "[]int64" and k != "dt"]
    assert list(rec.SAMPLE_LISTS) == samples
    writer = re.search(r"var SampleLists = \[8\]string\{(.*?)\}", "".join(p.read_text() for p in go_sources()))
    assert list(rec.SAMPLE_LISTS) == re.findall(r'"(\w+)"', writer.group(1))
    nvml = [k for k, t in structs["NVML"] if t == "[]int64" and k != "dt"]
    assert nvml == ["used", "reserved"] and {"used", "reserved"} <= frame_fields(rec._decode_nvml)[1]


# ---------------------------------------------------------------- rows, as export makes them

def time_string(t: int) -> str:
    """summary.TimeString in UTC: milliseconds, cut, not rounded."""
    s, ns = divmod(t, 10**9)
    return (datetime.datetime.fromtimestamp(s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            + f".{ns // 10**6:03d}Z")


def opt(v) -> str:
    return "" if v is None else str(v)


def rec_rows(r: rec.Recording) -> list[dict[str, str]]:
    """The summary table as rec.py reads the recording, in export's columns:
    the rows, one OOM row per oom frame (on the device its hello
    maps the torch index to), and NVML used / peak from rec.py's decoded
    NVML series where the row does not carry them (FORMAT.md, Frames)."""
    rows = [dict(s) for s in r.snapshots]
    for o in r.ooms:
        if any(s.get("source") == "oom" and s.get("pid") == o["pid"] and s["t"] == o["t"] for s in r.snapshots):
            continue
        hello = [h for h in r.hellos if h["pid"] == o["pid"]][-1]
        uuid = next(d["uuid"] for d in hello["devices"] if d["index"] == o["dev"])
        rows.append({"t": o["t"], "label": "OOM", "dev": r.device_for_uuid(uuid), "pid": o["pid"],
                     "source": "oom", **{k: o[k] for k in ("allocated", "reserved", "peak")},
                     "oom_requested": o.get("requested", 0), "oom_free": o.get("free", 0),
                     "oom_limit": o.get("limit") or None})
    rows.sort(key=lambda x: x["t"])  # stable: file order within a time, as the store keeps them
    out = []
    for i, x in enumerate(rows):
        s = r.nvml.get(x["dev"])
        used, peak = x.get("nvml_used"), x.get("nvml_peak")
        if s is not None and s.t:
            # used: the last sample at or before the row; peak: the highest
            # since the device's previous row (or the first sample, where the
            # store starts), the level then included
            prev = [y["t"] for y in rows[:i] if y["dev"] == x["dev"] and y["t"] <= x["t"]]
            frm = prev[-1] if prev else s.t[0]
            level = s.at(frm)
            got = (s.at(x["t"]), max(s.window(frm, x["t"]) + ([level] if level is not None else []), default=None))
            if used is None and peak is None:
                used, peak = got
            else:
                # a row written with its figures: gputop computed them live
                # from the samples rec.py decodes
                assert (used, peak) == got, (r.path, x)
        out.append({"label": x["label"], "time": time_string(x["t"]), "device": str(x["dev"]),
                    "device_name": r.devices[x["dev"]]["name"], "pid": str(x["pid"]) if x.get("pid") else "",
                    "source": x["source"], "allocated_bytes": opt(x.get("allocated")),
                    "reserved_bytes": opt(x.get("reserved")), "peak_bytes": opt(x.get("peak")),
                    "nvml_used_bytes": opt(used), "nvml_peak_bytes": opt(peak),
                    "oom_requested_bytes": opt(x.get("oom_requested")), "oom_free_bytes": opt(x.get("oom_free")),
                    "oom_limit_bytes": opt(x.get("oom_limit"))})
    return out


def export_rows(gputop_bin: str, path: Path, out: Path) -> list[dict[str, str]]:
    p = subprocess.run([gputop_bin, "export", str(path), "--csv", str(out)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, TZ="UTC"))
    assert p.returncode == 0, p.stdout + p.stderr
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert f"({len(rows)} row{'' if len(rows) == 1 else 's'})" in p.stdout
    return rows


def same_rows(gputop_bin: str, path: Path, tmp_path: Path) -> int:
    r = rec.load(str(path))
    assert not r.errors and r.last_line_complete, r.errors
    mine = rec_rows(r)
    theirs = export_rows(gputop_bin, path, tmp_path / (path.name + ".csv"))
    assert len(mine) == len(theirs), path
    key = lambda x: (x["time"], x["device"], x["pid"], x["label"], x["source"])  # noqa: E731
    for i, (m, g) in enumerate(zip(sorted(mine, key=key), sorted(theirs, key=key)), 1):
        assert m == {k: g[k] for k in m}, f"{path.name}, row {i}"
    return len(mine)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_rec_reads_rows_as_gputop_export(gputop_bin: str, path: Path, tmp_path: Path):
    n = same_rows(gputop_bin, path, tmp_path)
    assert n == {"demo.gputop": 6, "edits-v3.gputop": 6, "h200-spikes.gputop": 0}.get(path.name, 1)


def test_rec_follows_row_edits_as_gputop_export(gputop_bin: str, tmp_path: Path):
    """A recording whose first row was renamed and last row deleted in the
    TUI (row_edit lines after them): rec.py and export read the same 5 rows."""
    src = REPO / "demo" / "demo.gputop"
    lines = src.read_text().splitlines()
    snaps = [json.loads(x) for x in lines if x.startswith('{"type":"snapshot"')]
    first, last = snaps[0], snaps[-1]
    ref = lambda f: {"t": f["t"], "dev": f["dev"], **({"pid": f["pid"]} if f.get("pid") else {}), "label": f["label"]}  # noqa: E731
    lines += [json.dumps({"type": "row_edit", **ref(first), "rename": "Renamed start"}),
              json.dumps({"type": "row_edit", **ref(last), "delete": True})]
    path = tmp_path / "edited.gputop"
    path.write_text("\n".join(lines) + "\n")
    assert same_rows(gputop_bin, path, tmp_path) == 5
    labels = [x["label"] for x in rec.load(str(path)).snapshots]
    assert labels[0] == "Renamed start" and last["label"] not in labels[-1:], labels


def test_rec_follows_row_edits_by_id_as_gputop_export(gputop_bin: str, tmp_path: Path):
    """Twin rows (one time, device, pid and label, told apart by their ids
    and figures): an edit by id of the second deletes the second, in rec.py
    as in export."""
    lines = (REPO / "demo" / "demo.gputop").read_text().splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith('{"type":"snapshot"'))
    first = {**json.loads(lines[i]), "id": 1}
    twin = {**first, "id": 2, "allocated": first["allocated"] + 1}
    lines[i:i + 1] = [json.dumps(first), json.dumps(twin)]
    ref = {k: first[k] for k in ("t", "dev", "pid", "label")}
    lines += [json.dumps({"type": "row_edit", "id": 2, **ref, "delete": True}),
              json.dumps({"type": "row_edit", "id": 1, **ref, "rename": "the first"})]
    path = tmp_path / "twins.gputop"
    path.write_text("\n".join(lines) + "\n")
    assert same_rows(gputop_bin, path, tmp_path) == 6
    rows = rec.load(str(path)).snapshots
    assert rows[0]["label"] == "the first" and rows[0]["allocated"] == first["allocated"], rows[0]
    assert all(r.get("id") != 2 for r in rows)


def test_rec_nvml_series_is_gputops(gputop_bin: str, tmp_path: Path):
    # the H200 spikes recording (version 1, NVML at 1 kHz, twenty 4 GiB
    # spikes of 5 ms) with rows added that carry no NVML figures: gputop
    # computes each row's used and peak from its own decoding of the
    # batches, rec.py from its own
    src = REPO / "testdata" / "recordings" / "h200-spikes.gputop"
    s = rec.load(str(src)).nvml[0]
    assert len(s.t) > 15000
    rng = random.Random(13)
    times = {s.t[i] + d for i in range(0, len(s.t), 97) for d in (0, 1, -1)}
    top = sorted(range(len(s.t)), key=s.used.__getitem__)[-40:]  # inside the spikes
    times |= {s.t[i] + rng.choice((0, 1, 400_000)) for i in top}
    times = sorted(t for t in times if s.t[0] - 5 <= t <= s.t[-1])
    path = tmp_path / "spikes-rows.gputop"
    with open(path, "wb") as fh:
        fh.write(src.read_bytes())
        for i, t in enumerate(times):
            fh.write(json.dumps({"type": "snapshot", "t": t, "label": f"probe {i}", "dev": 0,
                                 "source": "key"}, separators=(",", ":")).encode() + b"\n")
    assert same_rows(gputop_bin, path, tmp_path) == len(times) > 400


# ---------------------------------------------------------------- what gputop record writes

class Peer:
    """An agent connection spoken frame by frame, as the protocol has it."""

    def __init__(self, sock: str) -> None:
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(sock)

    def send(self, *frames: dict) -> None:
        self.s.sendall(b"".join(json.dumps(f, separators=(",", ":")).encode() + b"\n" for f in frames))


def wait_for(path: Path, *lines: bytes) -> None:
    """Until each of lines starts a line of the recording (the writer flushes every 100 ms)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = b"\n" + (path.read_bytes() if path.exists() else b"")
        if all(b"\n{" + x in text for x in lines):
            return
        time.sleep(0.02)
    pytest.fail(f"{path} never held {lines}")


def test_rec_reads_what_gputop_record_wrote(gputop_bin: str, tmp_path: Path, sock_path: str):
    out = tmp_path / "peer.gputop"
    with open(tmp_path / "record.log", "w") as log:
        p = common.start_gputop(gputop_bin, str(out), sock_path, "agent", log)
    assert p is not None, (tmp_path / "record.log").read_text()
    rng = random.Random(2026)
    sent: dict[tuple[int, int], list[dict]] = {}
    t0 = time.time_ns() - 3 * 10**9
    try:
        a, b = Peer(sock_path), Peer(sock_path)
        a.send({"type": "hello", "v": 1, "pid": 4242, "host": "trainbox", "argv": ["train.py"], "rate_hz": 1000,
                "devices": [{"index": 0, "uuid": GPU1, "name": "NVIDIA H200", "total": 150754820096},
                            {"index": 1, "uuid": GPU0, "name": "NVIDIA H200", "total": 150754820096}],
                "t": t0})
        b.send({"type": "hello", "v": 1, "pid": 4243, "devices": [
            {"index": 0, "uuid": GPU0, "name": "NVIDIA H200", "total": 150754820096}], "t": t0})
        counters = {k: 0 for k in rec.SAMPLE_LISTS}
        for i in range(2400):  # 1 ms apart: 1.2 s of samples per device, a dozen batches each
            pid, dev = (4242, i % 2) if i % 8 else (4243, 0)
            for k in counters:
                r = rng.random()
                if k in ("allocated", "reserved", "peak"):
                    # steps of every size, wrapping past 2**64 both ways
                    counters[k] = rng.choice([counters[k], rng.randrange(U64), (counters[k] + rng.randrange(1 << 40)) % U64,
                                              (counters[k] - rng.randrange(1 << 40)) % U64, U64 - 1, 0])
                else:
                    # optional counters: zero for whole batches, then not
                    counters[k] = 0 if (i // 300) % 2 else (r < 0.7) * rng.randrange(1 << 63)
            f = {"type": "sample", "t": t0 + 10**6 * (i + 1), "dev": dev, **counters}
            (a if pid == 4242 else b).send(f)
            want = {"type": "sample", "pid": pid, "t": f["t"], "dev": dev,
                    **{k: v for k, v in counters.items() if v or k in ("allocated", "reserved", "peak")}}
            sent.setdefault((pid, dev), []).append(want)
        tm = t0 + 2500 * 10**6
        a.send({"type": "mark", "t": tm, "label": "Epoch 1", "devs": [
            {"dev": 0, "allocated": 1 << 30, "reserved": 2 << 30, "peak": 3 << 30},
            {"dev": 1, "allocated": 5, "reserved": 6, "peak": 7}]},
               {"type": "mark", "t": tm + 10, "label": "eval", "kind": "phase_start",
                "devs": [{"dev": 1, "allocated": 8, "reserved": 9, "peak": 10}]},
               {"type": "oom", "t": tm + 20, "dev": 1, "requested": 8 << 30, "free": 1 << 20, "limit": 7 << 30,
                "allocated": 11, "reserved": 12, "peak": 13})
        b.s.close()  # without bye: gputop records that it ended
        # every frame sent is in: the OOM came after all of 4242's samples,
        # the end after all of 4243's
        wait_for(out, b'"type":"oom","pid":4242,', b'"type":"ended","pid":4243,')
        snap = subprocess.run([gputop_bin, "snap", "from the shell", "--socket", sock_path],
                              capture_output=True, text=True, timeout=30)
        assert snap.returncode == 0, snap.stdout + snap.stderr
        a.send({"type": "bye", "t": time.time_ns()})
        wait_for(out, b'"type":"bye","pid":4242,')
        a.s.close()
    finally:
        common.stop_proc(p)
    assert p.returncode == 0, (tmp_path / "record.log").read_text()

    r = rec.load(str(out))
    assert not r.errors and r.last_line_complete, r.errors
    assert r.counts["samples"] >= 30 and "sample" not in r.counts, r.counts
    # sample for sample, per process and device, in the order sent
    got: dict[tuple[int, int], list[dict]] = {}
    for x in r.samples:
        got.setdefault((x["pid"], x["dev"]), []).append(x)
    assert set(got) == set(sent) == {(4242, 0), (4242, 1), (4243, 0)}
    for k in sent:
        assert len(got[k]) == len(sent[k]), k
        for i, (g, w) in enumerate(zip(got[k], sent[k])):
            assert g == w, (k, i)
    assert sorted(h["pid"] for h in r.hellos) == [4242, 4243]
    assert [x["pid"] for x in r.byes] == [4242] and [x["pid"] for x in r.ended] == [4243]
    assert {d["uuid"] for d in r.devices.values()} == {GPU0, GPU1}
    # the rows: the marks', the OOM's, and those `gputop snap` took from
    # gputop's own samples of each process
    assert same_rows(gputop_bin, out, tmp_path) == 6
    cli = [x for x in r.snapshots if x["source"] == "cli"]
    assert len(cli) == 2  # pid 4242 on both devices; 4243 had ended
    for row in cli:
        hello = next(h for h in r.hellos if h["pid"] == row["pid"])
        dev = next(d["index"] for d in hello["devices"] if r.device_for_uuid(d["uuid"]) == row["dev"])
        last = [x for x in got[(row["pid"], dev)] if x["t"] <= row["t"]][-1]
        assert {k: row[k] for k in ("allocated", "reserved", "peak")} == \
            {k: last[k] for k in ("allocated", "reserved", "peak")}, row
