"""GPUTOP_MEMORY_CAP (the agent's _cap): the allocator capped at CUDA's
initialisation, as gputop fit asks in each child, over the fake GPU, whose
allocations past the cap fail as torch's do."""

from __future__ import annotations

import importlib
import os

import pytest

from fakegpu import CONTEXT, TOTAL, FakeGPU, MiB
from gputop import _backend, _cap

_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
torch = _need("torch")


def applied(monkeypatch: pytest.MonkeyPatch, spec: str | None, backend: _backend.Backend,
            dev: int = 0) -> list[tuple[str, str]]:
    if spec is None:
        monkeypatch.delenv(_cap.ENV, raising=False)
    else:
        monkeypatch.setenv(_cap.ENV, spec)
    notes: list[tuple[str, str]] = []
    _cap.apply(backend, dev, lambda kind, detail: notes.append((kind, detail)))
    return notes


def test_a_cap_in_bytes_makes_the_next_allocation_past_it_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGPU(1)
    backend = gpu.install()
    seen: list[tuple[int, int, int, int]] = []
    backend.watch_ooms(lambda *a: seen.append(a))
    notes = applied(monkeypatch, str(64 * MiB), backend)
    assert notes == [("cap", f"dev=0 cap={64 * MiB} free={TOTAL - CONTEXT} total={TOTAL}")]
    assert gpu.caps == {0: 64 * MiB}
    gpu.alloc(0, 60 * MiB)
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 8.00 MiB"):
        gpu.alloc(0, 8 * MiB)
    # torch's OOM observer gets the cap as the device's limit
    assert seen == [(0, 8 * MiB, 64 * MiB, MiB)]
    assert gpu.c[0]["allocated"] == 60 * MiB and gpu.c[0]["ooms"] == 1
    gpu.alloc(0, 4 * MiB)  # up to the cap still fits
    assert gpu.c[0]["allocated"] == 64 * MiB


def test_free_caps_at_what_the_device_has_free(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGPU(2)
    backend = gpu.install()
    gpu.alloc(1, 10 * MiB)
    notes = applied(monkeypatch, "free", backend, dev=1)
    free = TOTAL - CONTEXT - 10 * MiB
    assert notes == [("cap", f"dev=1 cap={free} free={free} total={TOTAL}")]
    assert gpu.caps == {1: free}


def test_a_cap_above_the_device_is_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGPU(1)
    notes = applied(monkeypatch, str(10 * TOTAL), gpu.install())
    assert notes == [("cap", f"dev=0 cap={TOTAL} free={TOTAL - CONTEXT} total={TOTAL}")]


def test_unset_caps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGPU(1)
    assert applied(monkeypatch, None, gpu.install()) == []
    assert applied(monkeypatch, "  ", gpu.install()) == []
    assert gpu.caps == {}


@pytest.mark.parametrize("spec, why", [
    ("16GiB", "error=GPUTOP_MEMORY_CAP='16GiB' is neither a number of bytes nor 'free'"),
    ("0", "error=GPUTOP_MEMORY_CAP=0 is not a number of bytes above 0"),
    ("-5", "error=GPUTOP_MEMORY_CAP=-5 is not a number of bytes above 0"),
])
def test_a_bad_value_is_said_and_caps_nothing(monkeypatch: pytest.MonkeyPatch, spec: str, why: str) -> None:
    gpu = FakeGPU(1)
    assert applied(monkeypatch, spec, gpu.install()) == [("cap", "dev=0 " + why)]
    assert gpu.caps == {}


def test_a_framework_that_cannot_cap_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = applied(monkeypatch, str(64 * MiB), _backend.Backend())
    assert notes == [("cap", "dev=0 error=Unsupported: this framework cannot say how much of the device is free")]

    class Raises(_backend.Backend):
        def memory_info(self, index: int) -> tuple[int, int]:
            raise RuntimeError("CUDA error: out of memory")

    notes = applied(monkeypatch, "free", Raises())
    assert notes == [("cap", "dev=0 error=RuntimeError: CUDA error: out of memory")]
