"""What a memory dump costs the training thread (issue #29): at an OOM
with 17 blocks of 8 GiB in use (136 GiB on the fake GPU), torch is asked
for its snapshot once, however much memory is in use; the dump's report
says where its time went, phase by phase, and its figures add up to what
the thread spent; nothing of gputop's runs beside it (a holders walk asked
for meanwhile, the agent thread's layout reading) while its data is being
taken; and history asked for before CUDA is up records from the first
allocation. Counts and the order of calls, not speed: the timing goals
are bench/history_check.py's."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time

import pytest
from conftest import LineServer
from fakegpu import FakeGPU

import gputop

GiB = 1 << 30
HELD = 17  # the OOM: 17 blocks of 8 GiB held, the 18th fails


def of_type(server: LineServer, typ: str) -> list[dict]:
    return [f for f in (json.loads(x) for x in server.lines()) if f["type"] == typ]


@pytest.fixture
def dump_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    d = str(tmp_path / "dumps")
    monkeypatch.setenv("GPUTOP_DUMP_DIR", d)
    return d


def fill(gpu: FakeGPU) -> list[int]:
    return [gpu.block(0, 8 * GiB) for _ in range(HELD)]


def slow_snapshot(gpu: FakeGPU, secs: float, during=None) -> list[dict]:
    """torch's _snapshot() taking secs (asleep, in Python, so that other
    threads and pending calls may run); during() is called once inside.
    Returns what each call saw: the layout readings made while it ran."""
    seen: list[dict] = []
    real = gpu.memory._snapshot

    def snapshot(*a, **kw):
        layout0 = gpu.layout.calls if gpu.layout is not None else 0
        gpu.inside = True
        try:
            if during is not None:
                during()
            end = time.perf_counter() + secs
            while time.perf_counter() < end:
                time.sleep(0.002)
            return real(*a, **kw)
        finally:
            gpu.inside = False
            seen.append({"layout_calls": (gpu.layout.calls if gpu.layout is not None else 0) - layout0})

    gpu.memory._snapshot = snapshot
    gpu.inside = False
    return seen


def test_an_oom_asks_torch_for_one_snapshot_at_136_gib(server: LineServer, dump_dir: str):
    """The layout at the error is summed from the dump's data: torch's
    snapshot is not taken twice (once for the layout, once for the dump)."""
    gpu = FakeGPU(1, layout="torch")
    gpu.install()
    gputop.attach(history=100_000, layout_rate=0.01)  # the periodic reading out of the way
    held = fill(gpu)
    assert server.wait(lambda: of_type(server, "hello") and of_type(server, "layout"))
    layout0, snaps0 = gpu.layout.calls, gpu.memory.snapshots
    gpu.oom(0, 8 * GiB)
    assert (gpu.layout.calls - layout0) + (gpu.memory.snapshots - snaps0) == 1
    assert server.wait(lambda: of_type(server, "oom"))
    o = of_type(server, "oom")[0]
    assert o["layout"]["segments"] == HELD and o["layout"]["allocated"] == HELD * 8 * GiB
    assert o["dump"]["path"] and len(held) == HELD
    with open(o["dump"]["path"], "rb") as f:
        segs = pickle.load(f)["segments"]
    assert len(segs) == HELD


def test_the_dumps_report_adds_up_to_what_the_thread_spent(server: LineServer, dump_dir: str):
    """took_ms is the wall time from the call to the file in place, the
    sum of its phases; gil_ms the CPU time of the thread (torch asleep
    holds no GIL). Before, took_ms counted torch's call twice and gil_ms
    counted its wall time."""
    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(history=1000)
    fill(gpu)
    assert server.wait(lambda: of_type(server, "hello"))
    slow_snapshot(gpu, 0.3)
    t0 = time.perf_counter()
    gpu.oom(0, 8 * GiB)
    wall = (time.perf_counter() - t0) * 1e3
    assert server.wait(lambda: of_type(server, "oom"))
    d = of_type(server, "oom")[0]["dump"]
    ph = d["phases"]
    assert set(ph) == {"wait_ms", "take_ms", "take_cpu_ms", "pickle_ms", "write_ms", "fsync_ms", "place_ms"}
    assert 300 <= ph["take_ms"] <= d["took_ms"] <= wall, (d, wall)
    assert d["took_ms"] == pytest.approx(sum(v for k, v in ph.items() if k != "take_cpu_ms"), abs=0.01)
    assert ph["take_cpu_ms"] < ph["take_ms"] / 2 and d["gil_ms"] < d["took_ms"] / 2, d


def test_nothing_of_gputops_runs_while_a_dump_is_taken(server: LineServer, dump_dir: str,
                                                      monkeypatch: pytest.MonkeyPatch):
    """A holders walk gputop asks for while the OOM's dump is being taken
    (the OOM forecast's, the h key's) does not run inside it on the
    training thread: it waits and runs after; the agent thread's periodic
    layout reading skips that moment."""
    from gputop import _holders

    monkeypatch.setenv("GPUTOP_HOLDERS_DEVICE", "cpu")
    gpu = FakeGPU(1, layout="torch")
    gpu.install()
    gputop.attach(history=1000, layout_rate=10)
    fill(gpu)
    assert server.wait(lambda: of_type(server, "hello") and of_type(server, "layout"))
    walks: list[dict] = []
    real = _holders.holders

    def holders(*a, **kw):
        walks.append({"main": threading.current_thread() is threading.main_thread(),
                      "inside_dump": gpu.inside})
        return real(*a, **kw)

    monkeypatch.setattr(_holders, "holders", holders)

    def ask() -> None:
        server.send(0, b'{"type":"request","what":"holders","id":7}\n')

    seen = slow_snapshot(gpu, 0.5, during=ask)
    gpu.oom(0, 8 * GiB)
    assert server.wait(lambda: [h for h in of_type(server, "holders") if h.get("id") == 7], 10)
    assert walks and not any(w["inside_dump"] for w in walks), walks
    assert seen == [{"layout_calls": 0}]


def test_history_asked_before_cuda_records_the_first_allocation(server: LineServer, dump_dir: str):
    """attach(history=N) before CUDA is up: torch's history is on inside
    its lazy init, before the first allocation (not once the agent thread
    sees the device), so the first 8 GiB block has its stack."""
    gpu = FakeGPU(1, initialised=0)  # as torch: no device listed before its lazy init
    gpu.install()
    gputop.attach(history=100_000)
    assert gpu.memory.calls == []  # CUDA is not up: nothing to turn on yet
    gpu.init_cuda()
    assert [c["max_entries"] for c in gpu.memory.calls] == [100_000]
    first = gpu.block(0, 8 * GiB)  # FIRST_BLOCK
    rest = [gpu.block(0, 8 * GiB) for _ in range(HELD - 1)]
    # the OOM observer: the agent thread registers it once it sees the device
    assert server.wait(lambda: of_type(server, "hello") and of_type(server, "hello")[-1]["devices"])
    gpu.oom(0, 8 * GiB)
    assert server.wait(lambda: of_type(server, "oom"))
    with open(of_type(server, "oom")[0]["dump"]["path"], "rb") as f:
        state = pickle.load(f)
    blocks = {b["address"]: b for s in state["segments"] for b in s["blocks"]}
    top = blocks[first]["frames"][0]
    assert (os.path.basename(top["filename"]), top["name"]) == (
        "test_dump_cost.py", "test_history_asked_before_cuda_records_the_first_allocation")
    assert all(blocks[a]["frames"] for a in rest)
