"""Frame encoding: the agent's real code paths must produce the shared
vectors in testdata/protocol byte for byte (see its README for the inputs)."""

from __future__ import annotations

import json
import socket
import sys
import time
import types

import pytest
from conftest import REPO
from fakegpu import install

import gputop
from gputop import _agent, _lifecycle, _tracker, _wire
from gputop._backend import Counters

VECTORS = REPO / "testdata" / "protocol"
T0 = 1767225600000000000
MS = 1_000_000
MiB = 1 << 20
GPU0 = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
GPU1 = "GPU-d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
TOTAL = 150754820096


def vector(name: str) -> bytes:
    p = VECTORS / name
    assert p.exists(), f"missing shared test vector {p}"
    return p.read_bytes()


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> int:
        return self.t


class ScriptedAgent(_agent.Agent):
    """An agent whose thread never runs: the test calls its steps in order."""

    alive = True  # type: ignore[assignment]


class Fake:
    """Allocator counters set by the test, shaped as torch returns them."""

    def __init__(self, devices: list[dict]) -> None:
        self.devs = devices
        self.c = {d["index"]: Counters(0, 0, 0, 0, 0, 0, 0) for d in devices}

    def stats(self, i: int) -> dict:
        c = self.c[i]
        return {
            "allocated_bytes": {"all": {"current": c.allocated, "peak": c.peak}},
            "reserved_bytes": {"all": {"current": c.reserved, "peak": c.reserved_peak}},
            "inactive_split_bytes": {"all": {"current": c.inactive, "peak": 0}},
            "num_alloc_retries": c.alloc_retries,
            "num_ooms": c.ooms,
        }

    def set(self, i: int, *vals: int) -> None:
        self.c[i] = Counters(*(list(vals) + [0] * (7 - len(vals))))


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """An agent wired to one end of a socketpair, with the README's pid,
    host, argv, versions and a clock the test moves."""
    clock = Clock()
    monkeypatch.setattr(time, "time_ns", clock)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)  # a test run under torchrun or Slurm
    monkeypatch.setattr(socket, "gethostname", lambda: "trainbox")
    monkeypatch.setattr(sys, "argv", ["train.py", "--epochs", "10"])
    monkeypatch.setattr(_agent, "_python_version", lambda: "3.12.3")
    # CUDA_VISIBLE_DEVICES=1,0: cuda:0 is NVML GPU 1. torch hands out the
    # uuid without "GPU-" in some versions; the agent must add it.
    fake = Fake([
        {"index": 0, "uuid": GPU1[4:], "name": "NVIDIA H200", "total": TOTAL},
        {"index": 1, "uuid": GPU0[4:].upper(), "name": "NVIDIA H200", "total": TOTAL},
    ])
    src = install(fake.stats, fake.devs, version="2.11.0+cu130")
    ag = ScriptedAgent(100, on_devices=_lifecycle.found_devices)
    ag.pid = 4242
    a, b = socket.socketpair()
    a.setblocking(False)
    ag.conn.sock = a
    monkeypatch.setattr(_lifecycle, "_current", ag)
    yield ag, fake, clock, src, b
    a.close()
    b.close()


def received(b: socket.socket) -> bytes:
    b.setblocking(False)
    out = b""
    while True:
        try:
            d = b.recv(1 << 20)
        except BlockingIOError:
            return out
        if not d:
            return out
        out += d


def test_session_vector_from_the_agents_own_code(scripted, monkeypatch):
    ag, fake, clock, src, peer = scripted
    want = vector("session.ndjson").splitlines(keepends=True)
    # the rows' walks: the end rows' attribution below, no ledger (the
    # vector is the protocol's first version; test_ledger.py has the ledger)
    held: dict[int, dict[int, dict]] = {}
    monkeypatch.setattr(_tracker, "_walk", lambda devs, is_end, verdict, ledger:
                        ({d: held[clock.t][d] for d in devs} if is_end else {}, {}))

    ag._check_devices()  # connect: hello
    ag._pump()
    clock.t = T0 + 10 * MS
    ag._sample()
    ag._pump()
    clock.t = T0 + 15 * MS
    fake.set(0, 4 * MiB, 20 * MiB, 4 * MiB)
    values = gputop.snapshot("Training start")
    assert values[0]["allocated"] == 4 * MiB and values[1]["reserved"] == 0
    ag._pump()
    clock.t = T0 + 20 * MS
    fake.set(0, 8396800, 20971520, 12591104, 20971520, 12574720)
    fake.set(1, 512, 2097152, 512, 2097152)
    ag._sample()
    ag._pump()
    # what the holders walks of the two end rows find (the walk itself is
    # tested in test_holders.py; its timing would change the bytes)
    top = [{"kind": "optimizer_state", "name": "optimizer (Adam)", "bytes": 8004000, "tensors": 8,
            "hint": "del optimizer; gputop.cleanup()"},
           {"kind": "parameters", "name": "model", "bytes": 4002000, "tensors": 4,
            "examples": ["float32[1000, 1000]", "float32[1000]"]}]
    held.update({
        T0 + 35 * MS: {0: {"t": T0 + 35 * MS, "allocated": 16785408, "python": 12006912, "internal": 4194304,
                           "workspaces": 1, "unaccounted": 584192, "top": top, "took_ms": 12.5}},
        T0 + 50 * MS: {d: {"t": T0 + 50 * MS, "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                           "took_ms": 3.25} for d in (0, 1)},
    })
    clock.t = T0 + 25 * MS
    phase = gputop.phase("eval")
    # a phase on one device: what the reference's single-device code does
    monkeypatch.setattr(src, "devices", lambda: [0])
    phase.__enter__()
    ag._pump()
    clock.t = T0 + 30 * MS
    fake.set(0, 16785408, 41943040, 25174016, 41943040, 8388608, 1, 1)
    monkeypatch.setattr(src, "devices", lambda: [0])
    ag.dropped = 3
    ag._devs = [0]
    ag._sample()
    ag._pump()
    clock.t = T0 + 35 * MS
    phase.__exit__(None, None, None)
    ag._pump()
    clock.t = T0 + 40 * MS
    src.oom(0, 2147483648, TOTAL, 1048576)  # what torch's allocator calls
    ag._pump()
    clock.t = T0 + 45 * MS
    report = {
        "dev": 0, "total": 16785408, "skipped": 2, "took_ms": 12.5,
        "groups": [
            {"kind": "parameters", "name": "model", "bytes": 4002000, "tensors": 4,
             "examples": ["float32[1000, 1000]", "float32[1000]"]},
            {"kind": "optimizer_state", "name": "optimizer (Adam)", "bytes": 8004000, "tensors": 8},
            {"kind": "container", "name": "losses", "bytes": 4779408, "tensors": 1000,
             "examples": ["float32[]"], "hint": "losses holds GPU tensors: append loss.item() instead"},
        ],
    }
    fake_holders = types.ModuleType("gputop._holders")
    fake_holders.holders_report = lambda: report  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop._holders", fake_holders)
    monkeypatch.setattr(gputop, "_holders", fake_holders, raising=False)
    ag._handle(vector("request.ndjson").rstrip(b"\n"))
    ag._pump()
    clock.t = T0 + 50 * MS
    monkeypatch.setattr(src, "devices", lambda: [0, 1])
    fake.set(0, 0, 0, 25174016)
    fake.set(1, 0, 0, 512)
    gputop.snapshot("After cleanup")
    ag._pump()
    clock.t = T0 + 60 * MS
    ag._finish()

    got = received(peer).splitlines(keepends=True)
    for i, (g, w) in enumerate(zip(got, want), 1):
        assert g == w, f"session.ndjson line {i}"
    assert len(got) == len(want)


def test_mark_unicode_vector(scripted):
    ag, fake, clock, src, peer = scripted
    ag._hello_devs = frozenset({0, 1})  # hello already said
    clock.t = T0 + 70 * MS
    fake.set(0, 1, 2097152, 3)
    label = 'Époque 5 — 训练 <eval> & "best"\ttab\\slash'
    t = gputop.Tracker(0)
    row = t.snapshot(label, ledger=False)  # the vector is the label's: a row without its ledger
    assert row is not None and row["allocated_bytes"] == 1 and row["device"] == 0
    ag._pump()
    assert received(peer) == vector("mark_unicode.ndjson")


def test_hello_vector_from_the_agent(scripted):
    ag, fake, clock, src, peer = scripted
    ag._check_devices()
    ag.conn.flush()
    assert received(peer) == vector("hello.ndjson")


def test_hello_rank_vector_from_the_agent(scripted, monkeypatch):
    # torchrun's environment: the hello carries the process's place in the job
    ag, fake, clock, src, peer = scripted
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "tr-5f3a")
    monkeypatch.setenv("SLURM_JOB_ID", "991")  # torchrun's id wins
    ag._check_devices()
    ag.conn.flush()
    assert received(peer) == vector("hello_rank.ndjson")


def test_hello_job_from_slurm_and_bad_values_sent_as_they_are(scripted, monkeypatch):
    # gputop judges the values; the agent neither parses nor fails over them
    ag, fake, clock, src, peer = scripted
    monkeypatch.setenv("RANK", "three")
    monkeypatch.setenv("SLURM_JOB_ID", "991")
    monkeypatch.setenv("LOCAL_RANK", "")
    ag._check_devices()
    ag.conn.flush()
    f = _wire.decode(received(peer))
    assert f["rank"] == "three" and f["job"] == "991"
    assert "local_rank" not in f and "world_size" not in f


@pytest.mark.parametrize("name,frame", [
    ("hello_rank_bad.ndjson", {"type": "hello", "v": 1, "pid": 4244, "rank": "three", "local_rank": "9",
                               "world_size": "8", "devices": [], "t": T0}),
    ("hello_minimal.ndjson", {"type": "hello", "v": 1, "pid": 4243, "devices": [], "t": T0}),
    ("snap.ndjson", {"type": "snap", "v": 1, "label": "Epoch 5"}),
    ("status.ndjson", {"type": "status", "v": 1}),
    ("reply_ok.ndjson", {"type": "reply", "ok": True}),
    ("reply_error.ndjson", {"type": "reply", "ok": False, "error": "no devices known yet"}),
    ("request.ndjson", {"type": "request", "what": "holders", "id": 1}),
])
def test_other_vectors(name, frame):
    assert _wire.encode(frame) == vector(name)
    # and the decoder reads back what it would write
    assert _wire.decode(vector(name)) == frame


def test_hello_without_devices_from_the_agent(scripted, monkeypatch):
    # A process without CUDA still says hello, with "devices":[] (not null).
    ag, fake, clock, src, peer = scripted
    monkeypatch.setattr(src, "devices", lambda: [])
    ag._check_devices()
    ag.conn.flush()
    line = received(peer)
    assert b'"devices":[],"t":1767225600000000000}\n' in line


def test_sample_fast_path_equals_generic_encoder():
    cases = [
        (0, 0, Counters(0, 0, 0, 0, 0, 0, 0), 0),
        (T0, 3, Counters(1, 2, 3, 4, 5, 6, 7), 8),
        (T0, 1, Counters(2**63, 2**64 - 1, 1, 0, 9, 0, 1), 0),
    ]
    for t, dev, c, dropped in cases:
        frame = {"type": "sample", "t": t, "dev": dev, **c._asdict(), "dropped": dropped}
        assert _wire.sample_line(t, dev, c, dropped) == _wire.encode(frame)


@pytest.mark.parametrize("x,want", [
    (100.0, "100"), (0.5, "0.5"), (12.5, "12.5"), (0.0, "0"), (-0.0, "-0"),
    (1e20, "100000000000000000000"), (1e21, "1e+21"), (123456789.125, "123456789.125"),
    (1e-6, "0.000001"), (1e-7, "1e-7"), (1.5e-7, "1.5e-7"), (2.5e-10, "2.5e-10"),
    (1e16, "10000000000000000"), (1.2345e-5, "0.000012345"), (1e100, "1e+100"),
    (0.1 + 0.2, "0.30000000000000004"),
])
def test_float_like_go(x, want):
    assert _wire.float64(x) == want


@pytest.mark.parametrize("s,want", [
    ("plain", '"plain"'),
    ("<a & b>", '"<a & b>"'),  # HTML escaping off, as the vectors are
    ("q\"b\\", '"q\\"b\\\\"'),
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\x00\x1f\x7f", '"\\u0000\\u001f\x7f"'),
    ("\u2028\u2029", '"\\u2028\\u2029"'),
    ("é训", '"é训"'),
    ("a\udcffb", '"a\\ufffdb"'),  # an undecodable argv byte, as Go writes it
])
def test_strings_like_go(s, want):
    assert _wire.string(s) == want


def test_omitempty_and_zero_values():
    # Fields without omitempty are written even when zero; pointers only
    # when set (a 0 pointer is still written).
    assert _wire.encode({"type": "bye", "t": 5}) == b'{"type":"bye","t":5}\n'
    assert _wire.encode({"type": "reply", "ok": False}) == b'{"type":"reply","ok":false}\n'
    assert _wire.encode({"type": "snapshot", "t": 1, "label": "x", "dev": 0, "source": "agent",
                         "allocated": 0}) == \
        b'{"type":"snapshot","t":1,"label":"x","dev":0,"source":"agent","allocated":0}\n'
    assert _wire.encode({"type": "mark", "t": 1, "label": "x", "devs": None}) == \
        b'{"type":"mark","t":1,"label":"x","devs":null}\n'


def test_encode_rejects_what_go_could_not_hold():
    with pytest.raises(ValueError, match="unknown frame type"):
        _wire.encode({"type": "nope"})
    with pytest.raises(KeyError, match="allocted"):
        _wire.encode({"type": "sample", "t": 1, "dev": 0, "allocted": 1})
    with pytest.raises(TypeError, match="allocated: want an integer"):
        _wire.encode({"type": "sample", "t": 1, "dev": 0, "allocated": "1"})
    # not strict: unknown keys are dropped, as Go's decoder drops them
    assert _wire.encode({"type": "bye", "t": 1, "extra": 2}, strict=False) == b'{"type":"bye","t":1}\n'


def test_decode_limits():
    with pytest.raises(ValueError):
        _wire.decode(b"[1,2]")
    with pytest.raises(ValueError):
        _wire.decode(b'{"type":7}')
    with pytest.raises(ValueError, match="exceeds"):
        _wire.decode(b" " * (_wire.MAX_FRAME_BYTES + 1))


def test_schemas_follow_wire_frames_go():
    """Every struct in wire/frames.go, field by field: json key, order and
    omitempty, so a change on the Go side fails here first."""
    import re

    src = (REPO / "wire" / "frames.go").read_text() + (REPO / "wire" / "status.go").read_text()
    structs = {}
    for m in re.finditer(r"type (\w+) struct \{(.*?)\n\}", src, re.S):
        fields = []
        for fm in re.finditer(r'^\s*(?:\w+\s+(\S+)\s+`json:"([^"]+)"`|(\w+)\s*$)', m.group(2), re.M):
            if fm.group(3):  # an embedded struct: its fields in its place (parsed before it)
                fields += structs[fm.group(3)]
                continue
            gotype, tag = fm.group(1), fm.group(2)
            key, *opts = tag.split(",")
            if key == "-":
                continue  # never on the wire: gputop fills it in itself
            fields.append((key, "omitempty" in opts, gotype))
        structs[m.group(1)] = fields
    by_type = {
        "hello": "Hello", "sample": "Sample", "mark": "Mark", "oom": "OOM", "holders": "Holders",
        "bye": "Bye", "snap": "Snap", "status": "Status", "reply": "Reply", "request": "Request",
        "recording": "Recording", "device": "Device", "nvml": "NVML", "samples": "Samples",
        "procs": "Procs",
        "device_error": "DevError", "snapshot": "Row", "ended": "Ended", "held": "RowHeld",
        "row_edit": "RowEdit",
        "host": "Host", "layout": "LayoutReading", "framework": "FrameworkReading",
    }
    nested = {"AgentDevice": _wire.AGENT_DEVICE, "DevStats": _wire.DEV_STATS,
              "HolderGroup": _wire.HOLDER_GROUP, "Proc": _wire.PROC, "Held": _wire.HELD,
              "Dump": _wire.DUMP, "Layout": _wire.LAYOUT, "Pool": _wire.POOL,
              "AllocSettings": _wire.ALLOC_SETTINGS, "Setting": _wire.SETTING,
              "Ledger": _wire.LEDGER, "Framework": _wire.FRAMEWORK, "Figure": _wire.FIGURE}
    assert set(by_type) == set(_wire.SCHEMAS)
    pairs = [(by_type[t], _wire.SCHEMAS[t]) for t in by_type] + list(nested.items())
    for name, schema in pairs:
        assert name in structs, f"wire/frames.go has no struct {name}"
        go = [(k, o) for k, o, _ in structs[name]]
        py = [(f[0], f[2]) for f in schema]
        assert py == go, f"schema of {name} differs from wire/frames.go"
        for (k, _, gotype), f in zip(structs[name], schema):
            kind = f[1]
            expect = {"string": "s", "bool": "b", "float64": "f", "[]string": "ls",
                      "[]int64": "li", "*uint64": "p", "*int": "p", "*bool": "pb",
                      "*Held": "O", "*Dump": "O", "*[]Proc": "pL", "*Layout": "O",
                      "*AllocSettings": "O"}.get(gotype)
            if expect is None and gotype.startswith("*") and gotype[1:] in structs:
                expect = "O"  # a pointer to one of wire's structs
            if gotype.startswith("[]") and expect is None:
                expect = "L"
            if expect is None:
                expect = "i"  # int, int64, uint64
            assert kind == expect, f"{name}.{k}: Go {gotype}, schema kind {kind}"


def test_end_label_shortcut_agrees_with_the_patterns():
    """is_end_label skips its patterns for labels with neither "end" nor
    "clean" in them; over labels of every case and some look-alikes it
    says what the patterns alone say."""
    import itertools

    def patterns(label: str) -> bool:
        if _wire._END_WORD.search(label):
            return True
        return bool(_wire._CLEANUP_WORD.search(label)) and not _wire._BEFORE_WORD.search(label)

    words = ["end", "END", "End", "eNd", "(end)", "(END)", "weekend", "ending", "clean up", "CLEAN-UP",
             "Clean_Up", "cleanup", "before", "PRE", "pre-clean", "Ｅｎｄ", "ｃｌｅａｎｕｐ", "ende", "énd",
             "Epoch 5", "", " ", "E N D", "cl ean", "after", "training"]
    labels = [" ".join(p) for p in itertools.product(words, repeat=2)]
    labels += [w.upper() for w in labels] + [w.title() for w in labels]
    wrong = [x for x in labels if _wire.is_end_label(x) != patterns(x)]
    assert wrong == []
    assert sum(map(_wire.is_end_label, labels)) > 100  # the patterns were reached


def test_end_labels_like_go():
    """The labels wire.IsEndLabel is held to (testdata/protocol/end_labels.json)."""
    v = json.loads((REPO / "testdata" / "protocol" / "end_labels.json").read_text())
    assert v["end"] and v["not_end"]
    assert [x for x in v["end"] if not _wire.is_end_label(x)] == []
    assert [x for x in v["not_end"] if _wire.is_end_label(x)] == []
