"""Tracker, cleanup and phase against the reference GPUMemoryTracker of
"How to clear GPU memory after PyTorch model training without restarting
kernel" (shared/seed): same lines, same table, same snapshot dicts."""

from __future__ import annotations

import json

import pytest
from conftest import LineServer
from fakegpu import MiB, FakeGPU

import gputop


class ReferenceTracker:
    """The article's GPUMemoryTracker, its printing verbatim, fed from the
    fake allocator instead of torch.cuda.memory_allocated() & co."""

    def __init__(self, gpu: FakeGPU, device: int = 0) -> None:
        self.gpu, self.dev = gpu, device
        self.snapshots = []

    def snapshot(self, label):
        c = self.gpu.c[self.dev]
        allocated = c["allocated"] / 1024**2
        cached = c["reserved"] / 1024**2
        max_allocated = c["peak"] / 1024**2
        snapshot = {
            "label": label,
            "allocated_mb": allocated,
            "cached_mb": cached,
            "max_allocated_mb": max_allocated,
        }
        self.snapshots.append(snapshot)
        print(f"[{label}] Allocated: {allocated:.2f} MB, "
              f"Cached: {cached:.2f} MB, "
              f"Peak: {max_allocated:.2f} MB")
        return snapshot

    def print_summary(self):
        print("\n" + "=" * 60)
        print("GPU Memory Summary")
        print("=" * 60)
        for snap in self.snapshots:
            print(f"  {snap['label']:30} "
                  f"Alloc: {snap['allocated_mb']:8.2f} MB | "
                  f"Cache: {snap['cached_mb']:8.2f} MB | "
                  f"Peak: {snap['max_allocated_mb']:8.2f} MB")
        print("=" * 60)


def training(gpu: FakeGPU, tracker) -> None:
    """The article's ModelTrainer.train, in allocator terms."""
    tracker.snapshot("Training start")
    gpu.alloc(0, 12939428)  # model + optimizer state: 12.34 MB
    gpu.alloc(0, 3492000)  # activations of one step
    gpu.free(0, 3492000)
    tracker.snapshot("Epoch 5")
    tracker.snapshot("Epoch 10")
    tracker.snapshot("Training end")


def test_tracker_prints_what_the_reference_prints(capsys):
    gpu = FakeGPU(1)
    gpu.alloc(0, 262144)  # 0.25 MB before training
    gpu.install()
    ours, ref = gputop.Tracker(), ReferenceTracker(gpu)
    for t in (ours, ref):
        gpu.set(0, allocated=262144, peak=262144, reserved=2 * MiB)
        training(gpu, t)
        t.print_summary()
    out = capsys.readouterr().out
    mine, theirs = out[: len(out) // 2], out[len(out) // 2:]
    assert mine == theirs
    assert "[Epoch 5] Allocated: 12.59 MB, Cached: 16.00 MB, Peak: 15.92 MB" in mine
    assert "  Epoch 10                       Alloc:    12.59 MB | Cache:    16.00 MB | Peak:    15.92 MB" in mine
    # the same dicts, plus exact bytes
    for a, b in zip(ours.snapshots, ref.snapshots):
        assert {k: a[k] for k in b} == b
        assert a["allocated_bytes"] == round(b["allocated_mb"] * MiB)
        assert a["reserved_bytes"] == round(b["cached_mb"] * MiB)
        assert a["peak_bytes"] == round(b["max_allocated_mb"] * MiB)
        assert a["device"] == 0 and a["t"] > 0


def test_tracker_reports_each_snapshot_to_gputop(server: LineServer):
    gpu = FakeGPU(2)
    gpu.alloc(1, 5 * MiB)
    gpu.install()
    t = gputop.Tracker("cuda:1")
    row = t.snapshot("Epoch 5")
    assert server.wait(lambda: any(b'"mark"' in x for x in server.lines()))
    m = [json.loads(x) for x in server.lines() if b'"mark"' in x][0]
    # only this tracker's device, with the very bytes the row holds
    assert [{k: v for k, v in d.items() if k != "ledger"} for d in m["devs"]] == [
        {"dev": 1, "allocated": row["allocated_bytes"], "reserved": row["reserved_bytes"],
         "peak": row["peak_bytes"]}]
    assert m["devs"][0]["ledger"] == row["ledger"]
    assert m["label"] == "Epoch 5"


@pytest.mark.parametrize("device,idx", [("cuda", 0), ("cuda:1", 1), (1, 1), (None, 0)])
def test_tracker_devices(device, idx, capsys):
    gpu = FakeGPU(2)
    gpu.alloc(1, 3 * MiB)
    gpu.install()
    row = gputop.Tracker(device).snapshot("x")
    assert row["device"] == idx
    assert row["allocated_bytes"] == (3 * MiB if idx == 1 else 0)


def test_tracker_on_cpu_device(capsys):
    FakeGPU(1).install()
    t = gputop.Tracker("cpu")
    assert t.snapshot("x") is None and t.snapshots == []
    assert "[x] cpu is not a CUDA device" in capsys.readouterr().out


def test_tracker_reset_peak():
    gpu = FakeGPU(2)
    gpu.install()
    gpu.alloc(1, 8 * MiB)
    gpu.free(1, 6 * MiB)
    t = gputop.Tracker("cuda:1")
    assert t.snapshot("before")["peak_bytes"] == 8 * MiB
    t.reset_peak()
    assert gpu.log == ["reset_peak 1"]
    assert t.snapshot("after")["peak_bytes"] == 2 * MiB


def test_cleanup_releases_and_reports(server: LineServer, capsys):
    gpu = FakeGPU(1)
    gpu.install()
    gpu.alloc(0, 100 * MiB)
    gpu.free(0, 60 * MiB)  # tensors deleted; cache keeps 100 MiB reserved
    r = gputop.cleanup()
    assert gpu.log == ["synchronize 0", "clear_workspaces", "empty_cache", "reset_peak 0", "ipc_collect"]
    assert r["released_allocated_bytes"] == 0
    assert r["released_reserved_bytes"] == 60 * MiB
    assert r["released_reserved_mb"] == 60.0
    assert r["before"][0]["peak"] == 100 * MiB  # the run's peak is kept here
    assert r["after"][0]["peak"] == 40 * MiB  # reset: peak of what follows
    out = capsys.readouterr().out
    assert "Cleanup complete - Allocated: 40.00 MB, Cached: 40.00 MB " \
           "(released 0.00 MB allocated, 60.00 MB cached: empty_cache 60.00 MB cached)" in out
    # what is left is no tensor Python reaches and no workspace: said so
    assert "40.00 MB still allocated that no Python object reaches" in out
    assert [s["step"] for s in r["steps"]] == ["gc.collect", "synchronize", "cuBLAS workspaces",
                                               "empty_cache", "ipc_collect"]
    assert r["held"][0]["unaccounted"] == 40 * MiB and r["held"][0]["python"] == 0
    assert server.wait(lambda: sum(b'"mark"' in x for x in server.lines()) == 2)
    marks = [json.loads(x) for x in server.lines() if b'"mark"' in x]
    assert [m["label"] for m in marks] == ["Before cleanup", "After cleanup"]
    assert marks[0]["devs"][0]["reserved"] == 100 * MiB and marks[1]["devs"][0]["reserved"] == 40 * MiB


def test_cleanup_keeps_peak_when_asked():
    gpu = FakeGPU(1)
    gpu.install()
    gpu.alloc(0, 10 * MiB)
    gpu.free(0, 10 * MiB)
    r = gputop.cleanup(verbose=False, reset_peak=False)
    assert "reset_peak 0" not in gpu.log
    assert r["after"][0]["peak"] == 10 * MiB
    assert r["released_reserved_bytes"] == 10 * MiB


def test_cleanup_collects_garbage_before_emptying_the_cache():
    # A reference cycle holding "GPU memory" is only freed by gc.collect();
    # cleanup must run it before empty_cache for the memory to come back.
    gpu = FakeGPU(1)
    gpu.install()

    class Blob:
        def __init__(self):
            gpu.alloc(0, 30 * MiB)
            self.me = self

        def __del__(self):
            gpu.free(0, 30 * MiB)

    Blob()
    r = gputop.cleanup(verbose=False)
    assert r["released_allocated_bytes"] == 30 * MiB
    assert r["released_reserved_bytes"] == 30 * MiB
    assert r["after"][0]["allocated"] == 0


def test_tracker_cleanup_lands_in_its_table(capsys):
    gpu = FakeGPU(1)
    gpu.install()
    t = gputop.Tracker()
    gpu.alloc(0, 4 * MiB)
    t.snapshot("Training end")
    gpu.free(0, 4 * MiB)
    t.cleanup()
    assert [s["label"] for s in t.snapshots] == ["Training end", "Before cleanup", "After cleanup"]
    assert t.snapshots[-1]["reserved_bytes"] == 0


def test_phase_marks_start_and_end_even_on_error(server: LineServer):
    gpu = FakeGPU(1)
    gpu.install()
    with pytest.raises(ZeroDivisionError):
        with gputop.phase("eval"):
            gpu.alloc(0, 2 * MiB)
            1 / 0

    @gputop.phase("step")
    def step():
        return 7

    assert step() == 7
    assert server.wait(lambda: sum(b'"mark"' in x for x in server.lines()) == 4)
    marks = [json.loads(x) for x in server.lines() if b'"mark"' in x]
    assert [(m["label"], m["kind"]) for m in marks] == [
        ("eval", "phase_start"), ("eval", "phase_end"), ("step", "phase_start"), ("step", "phase_end")]
    assert marks[0]["devs"][0]["allocated"] == 0 and marks[1]["devs"][0]["allocated"] == 2 * MiB


def test_snapshot_before_cuda_is_initialised():
    gpu = FakeGPU(1, initialised=0)
    gpu.install()
    assert gputop.snapshot("early") == {}


def test_marks_carry_the_cap(server: LineServer):
    """A row says the most torch may hold on each device when the backend
    can tell (torch's set_per_process_memory_fraction): a forecast's limit
    before any OOM does."""
    gpu = FakeGPU(2)
    src = gpu.install()
    src.limits[0] = 16 * 1024 * MiB
    gputop.snapshot("Step 1")
    assert server.wait(lambda: any(b'"mark"' in x for x in server.lines()))
    mark = next(json.loads(x) for x in server.lines() if b'"mark"' in x)
    devs = {d["dev"]: d for d in mark["devs"]}
    assert devs[0]["limit"] == 16 * 1024 * MiB
    assert "limit" not in devs[1]  # the backend cannot say: left out


def test_torch_limit_is_the_fraction_of_the_total():
    """torch's allocator allows total × fraction; a torch without
    get_per_process_memory_fraction says nothing."""
    from types import SimpleNamespace

    from gputop import _torch

    b = _torch.TorchBackend()
    b._info[0] = {"index": 0, "uuid": "GPU-x", "name": "x", "total": 150754820096}
    cuda = SimpleNamespace(get_per_process_memory_fraction=lambda i: 0.25)
    b._initialized = lambda: SimpleNamespace(cuda=cuda)  # type: ignore[method-assign]
    assert b.limit(0) == 150754820096 // 4
    b._initialized = lambda: SimpleNamespace(cuda=SimpleNamespace())  # type: ignore[method-assign]
    assert b.limit(0) is None
    # the C call behind it, where torch has one, is asked first (no device
    # normalising in Python at each row)

    def public(i: int) -> float:
        raise AssertionError("the Python wrapper was called")

    C = SimpleNamespace(_cuda_getMemoryFraction=lambda i: 0.5)
    b._initialized = lambda: SimpleNamespace(  # type: ignore[method-assign]
        _C=C, cuda=SimpleNamespace(get_per_process_memory_fraction=public))
    assert b.limit(0) == 150754820096 // 2
