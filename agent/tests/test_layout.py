"""The allocator's layout (issue #25's X-ray, the agent's part): what the
agent sends over the real socket (LineServer, and the real gputop binary
once) from the fake GPU's segments, blocks, pools and settings; its rate,
its bound and back-off, the marks' and OOMs' readings, and what it says
when it cannot read. The expected figures are worked out here from the
segments, apart from the agent's code."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from conftest import LineServer
from fakegpu import FakeGPU, segment

import gputop
from gputop import _backend, _layout, _torch, _torchlayout

MiB = 1 << 20
A, P, I = "active_allocated", "active_pending_free", "inactive"

# the default pool fragmented: a 64 MiB segment, every other 4 MiB block
# free, one waiting for another stream; a 20 MiB segment; a CUDA graph's
# private pool; a MemPool (or graph_pool_handle) pool
FRAGMENTED = [
    segment([(4 * MiB, A), (4 * MiB, I)] * 6 + [(4 * MiB, P), (12 * MiB, I)]),
    segment([(6 * MiB, A), (14 * MiB, I)], address=0x7E10_0000_0000),
    segment([(2 * MiB, A), (18 * MiB, I), (2 * MiB, A)], pool=(1, 0), address=0x7E20_0000_0000),
    segment([(2 * MiB, A)], pool=(0, 1), address=0x7E30_0000_0000),
]
FIGURES = ("segments", "blocks", "reserved", "allocated", "free_in_segments", "largest_free")


def expected(segs: list[dict], kinds: dict[tuple[int, int], str] | None = None) -> dict:
    """The layout's figures, worked out from the segments."""
    kinds = kinds or {(0, 0): "default", (1, 0): "graph", (0, 1): "private"}
    res = sum(s["total_size"] for s in segs)
    alloc = sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == A)
    free = [b["size"] for s in segs for b in s["blocks"] if b["state"] == I]
    pools: dict[tuple[int, int], dict] = {}
    for s in segs:
        pid = tuple(s["segment_pool_id"])
        p = pools.setdefault(pid, {"kind": kinds[pid], "id": f"{pid[0]},{pid[1]}", "segments": 0,
                                   "reserved": 0, "allocated": 0, "largest_free": 0})
        p["segments"] += 1
        p["reserved"] += s["total_size"]
        p["allocated"] += sum(b["size"] for b in s["blocks"] if b["state"] == A)
        p["largest_free"] = max([p["largest_free"]] + [b["size"] for b in s["blocks"] if b["state"] == I])
    return {"segments": len(segs), "blocks": sum(len(s["blocks"]) for s in segs), "reserved": res,
            "allocated": alloc, "free_in_segments": res - alloc, "largest_free": max(free, default=0),
            "pools": sorted(pools.values(), key=lambda p: (-p["reserved"], p["id"]))}


def frames(lines: list[bytes]) -> list[dict]:
    return [json.loads(x) for x in lines]


def of_type(lines: list[bytes], typ: str) -> list[dict]:
    return [f for f in frames(lines) if f["type"] == typ]


def figures(lay: dict) -> dict:
    return {k: lay.get(k, 0) for k in (*FIGURES, "pools")}


@pytest.fixture
def loose(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound far above what a reading of a few blocks costs even on a
    loaded machine: tests of what is read, not of the bound."""
    monkeypatch.setattr(_layout, "FLOOR_S", 0.5)
    monkeypatch.setattr(_layout, "CEIL_S", 0.5)


def layout_gpu(api: str = "torch", ndev: int = 1, segs: list[dict] | None = None, **kw) -> FakeGPU:
    gpu = FakeGPU(ndev, layout=api, **kw)
    gpu.layout.segments[0] = list(FRAGMENTED if segs is None else segs)
    gpu.install()
    return gpu


# ---- the periodic readings ----

def test_layout_frames_come_at_the_rate_with_the_segments_figures(server: LineServer, loose):
    layout_gpu()
    gputop.attach(layout_rate=5)
    assert server.wait(lambda: len(of_type(server.lines(), "layout")) >= 4, 10)
    got = of_type(server.lines(), "layout")
    gaps = [(b["t"] - a["t"]) / 1e9 for a, b in zip(got, got[1:])]
    assert min(gaps) >= 0.8 * 0.2, f"readings closer than the rate (5/s) allows: {gaps}"
    want = expected(FRAGMENTED)
    for f in got:
        assert f["dev"] == 0 and "skipped" not in f
        assert figures(f) == want
    # fragmentation: 72 MiB free in the segments, at most 18 MiB of it in one piece
    assert (want["free_in_segments"], want["largest_free"]) == (72 * MiB, 18 * MiB)
    assert gputop.status()["layout"]["readings"] >= 4


def test_default_rate_is_one_a_second(server: LineServer, monkeypatch):
    monkeypatch.delenv(_layout.ENV, raising=False)
    layout_gpu()
    ag = gputop.attach()
    assert ag.status()["layout"]["rate_hz"] == 1.0
    monkeypatch.setenv(_layout.ENV, "4")
    gputop.detach()
    assert gputop.attach().status()["layout"]["rate_hz"] == 4.0


def test_a_private_pool_appears_and_disappears(server: LineServer, loose):
    gpu = layout_gpu(segs=FRAGMENTED[:2])
    gputop.attach(layout_rate=10)

    def pools_seen() -> list[list[str]]:
        return [[p["id"] for p in f.get("pools", [])] for f in of_type(server.lines(), "layout")]

    assert server.wait(lambda: pools_seen() and pools_seen()[-1] == ["0,0"])
    graph = segment([(8 * MiB, A), (24 * MiB, I)], pool=(3, 0), address=0x7E40_0000_0000)
    gpu.layout.segments[0] = FRAGMENTED[:2] + [graph]
    assert server.wait(lambda: pools_seen()[-1] == ["0,0", "3,0"])
    f = of_type(server.lines(), "layout")[-1]
    assert f["pools"][1] == {"kind": "graph", "id": "3,0", "segments": 1, "reserved": 32 * MiB,
                             "allocated": 8 * MiB, "largest_free": 24 * MiB}
    assert figures(f) == expected(FRAGMENTED[:2] + [graph], {(0, 0): "default", (3, 0): "graph"})
    gpu.layout.segments[0] = FRAGMENTED[:2]  # the graph was freed, its pool emptied
    assert server.wait(lambda: pools_seen()[-1] == ["0,0"])


def test_pool_kinds_follow_torchs_pool_ids():
    kind = _torchlayout.pool_kind
    assert kind((0, 0), True) == "default"
    # a graph captured without a pool: (N, 0), MemPool(is_user_created=False)
    assert kind((7, 0), True) == kind((7, 0), False) == "graph"
    # graph_pool_handle() and MemPool() share (0, N): told apart only where MemPool does not exist
    assert kind((0, 4), True) == "private"
    assert kind((0, 4), False) == "graph"


def test_a_torch_without_mempool_calls_0_n_a_graphs_pool(server: LineServer, loose):
    layout_gpu("nomempool")
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    lay = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]
    assert figures(lay) == expected(FRAGMENTED, {(0, 0): "default", (1, 0): "graph", (0, 1): "graph"})


def test_pools_beyond_32_are_counted_not_listed(server: LineServer, loose):
    segs = [segment([((i + 1) * 2 * MiB, I)], pool=(i + 1, 0), address=0x7E00_0000_0000 + i * (1 << 32))
            for i in range(40)]
    layout_gpu(segs=segs)
    gputop.snapshot("many graphs")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    lay = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]
    assert len(lay["pools"]) == 32 and lay["pools_cut"] == 8
    assert [p["id"] for p in lay["pools"]] == [f"{i},0" for i in range(40, 8, -1)], "largest reserved first"
    assert lay["reserved"] == sum(s["total_size"] for s in segs), "the cut pools still count in the totals"


# ---- the settings ----

def test_settings_as_torch_reports_them(server: LineServer, loose, monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:128")
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    exp = segment([(6 * MiB, A), (26 * MiB, I)], expandable=True)
    gpu = layout_gpu(segs=[exp])
    gpu.layout.settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128",
                           "max_split_size": 128 * MiB, "garbage_collection_threshold": 0.0,
                           "expandable_segments": True, "roundup_power2_divisions": {"1": 0, "2": 4}}
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    lay = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]
    assert lay["expandable"] is True
    assert lay["settings"] == {
        "from": "torch", "env": "PYTORCH_CUDA_ALLOC_CONF",
        "conf": "expandable_segments:True,max_split_size_mb:128", "expandable_segments": True,
        "items": [{"name": "max_split_size", "value": str(128 * MiB)},
                  {"name": "garbage_collection_threshold", "value": "0.0"},
                  {"name": "roundup_power2_divisions", "value": "1:0,2:4"}]}
    assert set(gpu.layout.args) == {(0, 0, False)}, "torch's snapshot without traces"


def test_settings_from_the_string_torch_took(server: LineServer, loose, monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "garbage_collection_threshold:0.6")
    gpu = layout_gpu("getter")
    gpu.layout.conf = "garbage_collection_threshold:0.6"
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    st = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]["settings"]
    assert st == {"from": "torch", "env": "PYTORCH_ALLOC_CONF", "conf": "garbage_collection_threshold:0.6",
                  "items": [{"name": "garbage_collection_threshold", "value": "0.6"}]}


def test_settings_from_the_environment_say_which_variable(server: LineServer, loose, monkeypatch):
    # a torch that reports none: what the variable it reads asks for (an
    # older torch reads PYTORCH_CUDA_ALLOC_CONF only)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,roundup_power2_divisions:[256:1,>:4]")
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:64")
    layout_gpu("env", segs=[])
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    lay = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]
    assert lay["settings"] == {
        "from": "env", "env": "PYTORCH_CUDA_ALLOC_CONF",
        "conf": "expandable_segments:True,roundup_power2_divisions:[256:1,>:4]", "expandable_segments": True,
        "items": [{"name": "roundup_power2_divisions", "value": "[256:1,>:4]"}]}
    assert lay["expandable"] is True, "no segment yet: the next one will be expandable"
    # the settings torch's new allocator config reads first
    st = _torchlayout.Reader(lambda: [], environ=dict(os.environ)).settings()
    assert (st["from"], st["env"], st["conf"]) == ("env", "PYTORCH_ALLOC_CONF", "max_split_size_mb:64")


def test_a_torch_without_include_traces_is_read_and_says_what_it_costs(server: LineServer, loose, monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:256")
    gpu = layout_gpu("traces")
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    lay = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]
    assert figures(lay) == expected(FRAGMENTED)
    assert lay["settings"] == {"from": "env", "env": "PYTORCH_CUDA_ALLOC_CONF", "conf": "max_split_size_mb:256",
                               "items": [{"name": "max_split_size_mb", "value": "256"}]}
    assert set(gpu.layout.args) == {None}, "torch's _snapshot(), the only snapshot this torch has"
    assert "allocation history" in gputop.status()["layout"]["note"]


def test_settings_text_is_bounded(server: LineServer, loose, monkeypatch):
    conf = f"key0:{'v' * 300}," + ",".join(f"key{i}:{i}" for i in range(1, 100)) + ",x" * 100
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", conf)
    layout_gpu("env")
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    st = of_type(server.lines(), "mark")[0]["devs"][0]["layout"]["settings"]
    assert len(st["items"]) == 32 and len(st["conf"].encode()) <= 256
    assert all(len(i["value"].encode()) <= 256 for i in st["items"])
    assert st["items"][0]["value"].endswith("…")


# ---- the bound ----

def test_a_reading_too_costly_is_skipped_saying_why_and_backs_off(server: LineServer):
    gpu = layout_gpu()
    gpu.layout.counts[0] = (98, 500_000, 499_902)  # torch's counters: a million blocks
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: len(of_type(server.lines(), "layout")) >= 4, 10)
    got = of_type(server.lines(), "layout")
    why = "would take ~1000 ms with 1,000,000 blocks; bound 2 ms (no training step seen)"
    assert {f["skipped"] for f in got} == {why}
    assert all(f[k] == 0 for f in got for k in FIGURES) and not any("pools" in f for f in got)
    gaps = [(b["t"] - a["t"]) / 1e9 for a, b in zip(got, got[1:])]
    assert gaps[1] >= 1.5 * gaps[0] and gaps[2] >= 1.5 * gaps[1], f"no back-off: {gaps}"
    assert gpu.layout.calls == 0, "torch's memory snapshot was taken"
    # a mark goes out without one, at once
    vals = gputop.snapshot("Epoch 1")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    m = of_type(server.lines(), "mark")[0]
    assert "layout" not in m["devs"][0] and vals[0]["allocated"] == m["devs"][0]["allocated"]
    assert gpu.layout.calls == 0
    st = gputop.status()["layout"]
    assert st["last_skip"] == why and st["skipped"] >= 4 and st["readings"] == 0


def test_the_cost_per_block_is_learnt_from_the_readings(server: LineServer):
    # a slow machine: 100 µs of CPU a block, where the first guess is 1 µs
    gpu = layout_gpu(segs=[segment([(MiB, A), (MiB, I)] * 20)])
    gpu.layout.cost_per_block = 100e-6
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: len(of_type(server.lines(), "layout")) >= 3, 10)
    first, *later = of_type(server.lines(), "layout")
    assert "skipped" not in first and first["blocks"] == 40 and first["took_ms"] >= 4
    # the same 41 blocks (1 segment, 20 active, 20 inactive split) now cost what they did
    for f in later:
        assert f["skipped"].startswith("would take ~") and " with 41 blocks; bound 2 ms" in f["skipped"]
        assert float(f["skipped"].split("~")[1].split()[0]) >= 4
    assert gpu.layout.calls == 1


def test_the_bound_follows_the_training_step():
    gpu = FakeGPU(1, layout="torch")
    backend = gpu.install()
    gpu.layout.counts[0] = (98, 50_000, 49_902)
    lay = _layout.Layouts(backend, 1)
    # 240 ms steps: 12 samples rising, 12 falling, 10 ms apart
    t0 = time.time_ns() - 4 * 10**9
    for i in range(400):
        lay.observe(t0 + i * 10**7, 0, (1 << 30) + (i % 24 < 12) * (2 << 30))
    got = lay.periodic([0], time.monotonic())
    assert lay.step_s == pytest.approx(0.24)
    assert got[0]["skipped"] == "would take ~100 ms with 100,000 blocks; bound 12 ms (5% of a 240 ms step)"
    assert lay.bound()[0] == pytest.approx(0.012)


def test_step_period():
    sq = [(i * 10**7, 5 << 20 if i % 20 < 8 else 1 << 20) for i in range(300)]
    assert _layout.step_period(sq) == pytest.approx(0.2)
    flat = [(i * 10**7, (1 << 30) + (i % 3) * 4096) for i in range(300)]
    assert _layout.step_period(flat) is None, "bytes that hardly move show no step"
    assert _layout.step_period(sq[:30]) is None, "fewer than three rises"


def test_no_reading_while_the_snapshot_would_import_what_the_program_has_not(server: LineServer, loose):
    """torch 2.11's snapshot with history on imports torch._inductor: from
    the agent's thread that import broke the program's own (ImportError)."""
    gpu = layout_gpu()
    backend = _backend.get()
    backend.held_back = "with allocation history on, torch's memory snapshot imports torch._inductor"
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: of_type(server.lines(), "layout"))
    gputop.snapshot("Epoch 1")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    assert gpu.layout.calls == 0, "no snapshot taken, periodic or at the row"
    f = of_type(server.lines(), "layout")[0]
    assert f["skipped"] == backend.held_back and f["dev"] == 0
    assert of_type(server.lines(), "mark")[0]["devs"][0].get("layout") is None
    backend.held_back = ""  # the program imported it: readings resume
    assert server.wait(lambda: any("skipped" not in f for f in of_type(server.lines(), "layout")), 10)


def test_what_a_snapshot_imports_follows_sys_modules(monkeypatch: pytest.MonkeyPatch):
    for m in _torch.SNAPSHOT_IMPORTS:
        monkeypatch.delitem(sys.modules, m, raising=False)
    assert _torch.snapshot_imports(False) == "", "history off: torch's snapshot imports nothing"
    assert "torch._inductor" in _torch.snapshot_imports(True)
    half = types.ModuleType("torch._inductor")
    half.__spec__ = types.SimpleNamespace(_initializing=True)  # being imported by another thread
    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    monkeypatch.setitem(sys.modules, "torch._inductor", half)
    assert _torch.snapshot_imports(True), "a module still initialising is not imported yet"
    half.__spec__ = types.SimpleNamespace(_initializing=False)
    assert _torch.snapshot_imports(True) == ""


# ---- marks and OOMs ----

def test_a_mark_carries_the_layout_read_then(server: LineServer, loose):
    gpu = layout_gpu()
    gputop.attach(layout_rate=0.1)  # one periodic reading now, then none for 10 s
    assert server.wait(lambda: of_type(server.lines(), "layout"))
    n = gpu.layout.calls
    before = time.time_ns()
    gputop.snapshot("Epoch 1")
    with gputop.phase("eval"):
        pass
    assert server.wait(lambda: len(of_type(server.lines(), "mark")) == 3)
    assert gpu.layout.calls == n + 3, "each mark reads it afresh"
    for m in of_type(server.lines(), "mark"):
        lay = m["devs"][0]["layout"]
        assert figures(lay) == expected(FRAGMENTED) and lay["t"] >= before
        assert lay["settings"]["from"] == "torch"


def test_a_mark_takes_the_latest_reading_when_a_fresh_one_would_cost_too_much(server: LineServer):
    gpu = layout_gpu()
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: any("skipped" not in f for f in of_type(server.lines(), "layout")))
    gpu.layout.counts[0] = (98, 500_000, 499_902)
    n = gpu.layout.calls
    gputop.snapshot("Epoch 2")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    m = of_type(server.lines(), "mark")[0]
    lay = m["devs"][0]["layout"]
    assert figures(lay) == expected(FRAGMENTED) and lay["t"] < m["t"], "the latest reading, with its own time"
    assert gpu.layout.calls == n


def test_an_oom_carries_the_layout_at_the_error(server: LineServer, loose):
    gpu = layout_gpu()
    gpu.alloc(0, 16 * MiB)
    gputop.attach()
    assert server.wait(lambda: server.lines(0))
    gpu.oom(0, 20 * MiB)  # more than the largest free block (18 MiB), less than the free 72 MiB
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    o = of_type(server.lines(), "oom")[0]
    assert figures(o["layout"]) == expected(FRAGMENTED)
    assert o["layout"]["largest_free"] < o["requested"] < o["layout"]["free_in_segments"]


def test_an_oom_with_a_million_blocks_stays_within_its_bound(server: LineServer):
    gpu = layout_gpu()
    gpu.layout.counts[0] = (98, 500_000, 499_902)
    gputop.attach(layout_rate=0.1)
    assert server.wait(lambda: server.lines(0))
    gpu.oom(0, 20 * MiB)
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    assert "layout" not in of_type(server.lines(), "oom")[0]
    why = ("at the out-of-memory error: would take ~1000 ms with 1,000,000 blocks; "
           "bound 250 ms at an out-of-memory error")
    assert server.wait(lambda: why in [f.get("skipped") for f in of_type(server.lines(), "layout")])
    assert gpu.layout.calls == 0


# ---- what cannot be read ----

def test_a_reading_that_raises_is_said_and_never_reaches_training(server: LineServer, loose):
    gpu = layout_gpu()
    gpu.layout.error = RuntimeError("CUDA error: misaligned address")
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: len(of_type(server.lines(), "layout")) >= 2, 10)
    assert {f["skipped"] for f in of_type(server.lines(), "layout")} == {
        "the reading failed: RuntimeError: CUDA error: misaligned address"}
    vals = gputop.snapshot("still fine")  # raises nothing, carries no layout
    gpu.oom(0, 1 << 40)
    assert server.wait(lambda: of_type(server.lines(), "oom") and of_type(server.lines(), "mark"))
    assert "layout" not in of_type(server.lines(), "mark")[0]["devs"][0] and vals[0]["allocated"] == 0
    assert "layout" not in of_type(server.lines(), "oom")[0]
    n = len(of_type(server.lines(), "sample"))
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) > n + 10), "the agent stopped sampling"
    gpu.layout.error = None
    assert server.wait(lambda: "skipped" not in of_type(server.lines(), "layout")[-1], 10)


@pytest.mark.parametrize("api,why", [
    ("none", "this torch has no memory snapshot (torch.cuda.memory_snapshot): the allocator's layout cannot be read"),
    ("cudaMallocAsync", "the cudaMallocAsync allocator backend keeps no segments or blocks to read"),
])
def test_a_torch_that_cannot_read_it_says_so_once(server: LineServer, api: str, why: str):
    gpu = FakeGPU(2, layout="torch" if api == "cudaMallocAsync" else api,
                  backend="cudaMallocAsync" if api == "cudaMallocAsync" else "native")
    gpu.install()
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: len(of_type(server.lines(), "layout")) == 2)
    got = of_type(server.lines(), "layout")
    assert sorted(f["dev"] for f in got) == [0, 1] and all(f["skipped"].startswith(why) for f in got)
    gputop.snapshot("x")
    gpu.oom(0, 1 << 40)
    assert server.wait(lambda: of_type(server.lines(), "oom") and of_type(server.lines(), "mark"))
    time.sleep(0.5)
    assert len(of_type(server.lines(), "layout")) == 2, "said once, then not tried again"
    assert "layout" not in of_type(server.lines(), "mark")[0]["devs"][0]
    assert "layout" not in of_type(server.lines(), "oom")[0]
    assert gputop.status()["layout"]["stopped"].startswith(why)
    assert gpu.layout.calls == 0


def test_a_device_that_disappears_is_skipped_alone(server: LineServer, loose):
    gpu = layout_gpu(ndev=2)
    gputop.attach(layout_rate=10)
    assert server.wait(lambda: {f["dev"] for f in of_type(server.lines(), "layout")} == {0, 1})
    gpu.gone.add(1)
    n = len(server.lines())
    assert server.wait(lambda: any(f["dev"] == 1 and "skipped" in f for f in of_type(server.lines()[n:], "layout")))
    later = of_type(server.lines()[n:], "layout")
    assert {f["skipped"] for f in later if f["dev"] == 1} == {
        "device 1's allocator could not be read: RuntimeError: CUDA error: an illegal memory access was encountered"}
    assert server.wait(lambda: sum(f["dev"] == 0 and "skipped" not in f
                                   for f in of_type(server.lines()[n:], "layout")) >= 2)


# ---- the rate ----

def test_rate_0_turns_it_all_off(server: LineServer, monkeypatch):
    monkeypatch.setenv(_layout.ENV, "0")
    gpu = layout_gpu()
    gputop.attach()
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= 30)
    gputop.snapshot("x")
    gpu.oom(0, 1 << 40)
    assert server.wait(lambda: of_type(server.lines(), "oom") and of_type(server.lines(), "mark"))
    assert not of_type(server.lines(), "layout")
    assert "layout" not in of_type(server.lines(), "mark")[0]["devs"][0]
    assert "layout" not in of_type(server.lines(), "oom")[0]
    assert gpu.layout.calls == 0 and gputop.status()["layout"]["rate_hz"] == 0
    gputop.attach(layout_rate=5)  # and on again
    assert server.wait(lambda: of_type(server.lines(), "layout"))
    gputop.attach(layout_rate=0)
    n = gpu.layout.calls
    time.sleep(0.5)
    assert gpu.layout.calls <= n + 1


def test_a_bad_rate_is_refused_and_said(monkeypatch):
    monkeypatch.setenv(_layout.ENV, "fast")
    layout_gpu()
    with pytest.warns(RuntimeWarning, match="GPUTOP_LAYOUT_RATE='fast' is not a rate"):
        ag = gputop.attach()
    st = ag.status()["layout"]
    assert st["rate_hz"] == 1.0 and "GPUTOP_LAYOUT_RATE='fast'" in st["note"]
    with pytest.warns(RuntimeWarning, match="layout_rate=-1 is not a rate"):
        gputop.attach(layout_rate=-1)


# ---- torch's calls ----

def test_layout_reader_takes_the_cheapest_exact_reading():
    calls = []

    def snap(arg=None):
        calls.append(arg)
        return {"segments": [], "allocator_settings": {"expandable_segments": True}}

    def memory_snapshot(mempool_id=None, include_traces=True):
        return snap((0, 0, include_traces))["segments"]

    mem = types.SimpleNamespace(memory_snapshot=memory_snapshot, get_allocator_backend=lambda: "native")
    torch = types.SimpleNamespace(_C=types.SimpleNamespace(_cuda_memorySnapshot=snap), cuda=types.SimpleNamespace(memory=mem))
    r = _torch.layout_reader(torch)
    assert r.read([0])[0]["settings"] == {"from": "torch", "expandable_segments": True}
    assert calls == [(0, 0, False)] and not r.mempools and r.note == ""
    # a torch whose memory_snapshot takes no include_traces: _snapshot, said
    old = types.SimpleNamespace(memory_snapshot=lambda: [], _snapshot=lambda: {"segments": []})
    r = _torch.layout_reader(types.SimpleNamespace(_C=types.SimpleNamespace(_cuda_memorySnapshot=snap),
                                                   cuda=types.SimpleNamespace(memory=old)))
    assert r.call is old._snapshot and "allocation history" in r.note
    with pytest.raises(_backend.Unsupported, match="no memory snapshot"):
        _torch.layout_reader(types.SimpleNamespace(_C=types.SimpleNamespace(), cuda=types.SimpleNamespace(memory=None)))


# ---- the real gputop ----

def test_gputop_takes_the_layouts(gputop_bin: str, sock_path: str, tmp_path: Path, loose):
    """The real binary checks every frame (wire.Check) and refuses the
    process at the first bad one: layout frames, a mark's layouts and an
    OOM's must all pass, and the rows arrive."""
    rec, log = tmp_path / "rec.ndjson", open(tmp_path / "record.log", "w")
    p = subprocess.Popen([gputop_bin, "record", "-o", str(rec), "--source", "agent"],
                         env=dict(os.environ, GPUTOP_SOCKET=sock_path), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not (os.path.exists(sock_path) and stat.S_ISSOCK(os.stat(sock_path).st_mode)):
            assert p.poll() is None and time.monotonic() < deadline, (tmp_path / "record.log").read_text()
            time.sleep(0.02)
        gpu = layout_gpu(ndev=2)
        gpu.layout.segments[1] = [segment([(2 * MiB, A), (30 * MiB, I)], device=1, expandable=True)]
        gpu.alloc(0, 16 * MiB)
        ag = gputop.attach(layout_rate=10)
        deadline = time.monotonic() + 10
        while ag.status()["layout"]["readings"] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        gputop.snapshot("Epoch 1")
        gpu.oom(0, 20 * MiB)
        gpu.layout.counts[0] = (98, 5_000_000, 4_999_902)  # skipped frames too: ten million blocks
        time.sleep(0.5)
        st = ag.status()
        gputop.detach()
        assert st["layout"]["readings"] >= 3 and st["layout"]["skipped"] >= 1, st["layout"]
        assert st["connects"] == 1 and st["refused"] == "" and "refused" not in st["last_error"], st
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(20)
        log.close()
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    labels = {(f.get("label"), f.get("dev")) for f in lines if f["type"] == "snapshot"}
    assert {("Epoch 1", 0), ("Epoch 1", 1)} <= labels, labels
    ooms = [f for f in lines if f["type"] == "oom"]
    assert len(ooms) == 1 and figures(ooms[0]["layout"]) == expected(FRAGMENTED), "the OOM keeps its layout"
