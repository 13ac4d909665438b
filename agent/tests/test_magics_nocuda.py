"""%gpusnap's message when a snapshot has no allocator values, in this
process (no GPU here: torch's CUDA is absent), without a kernel."""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

from gputop import _magics

_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip


def test_gpusnap_says_cuda_is_absent(capsys: pytest.CaptureFixture[str]) -> None:
    torch = _need("torch")
    if torch.cuda.is_available():
        pytest.fail("this test needs a machine without CUDA (CI has none)")
    _magics.gpusnap_magic(None, "no gpu here")
    out = capsys.readouterr().out
    assert "CUDA is absent (torch.cuda.is_available() is False): no allocator values" in out, out
    assert "not initialised" not in out


def test_gpusnap_says_cuda_is_not_initialised(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert "CUDA is not initialised yet" in _magics._why_no_values()
    monkeypatch.delitem(sys.modules, "torch")
    assert _magics._why_no_values() == "torch is not imported"
