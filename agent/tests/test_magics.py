"""The notebook magics, in a real IPython kernel driven over ZeroMQ by
jupyter_client, as a notebook front end drives it.

The kernel walks CPU tensors (GPUTOP_HOLDERS_DEVICE=cpu, the test knob),
reads a pretend allocator (tests/fakegpu.py, injected from a cell) and
streams to a stand-in gputop (conftest.LineServer) over the real socket.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import tempfile
from typing import Any, Iterator

import pytest

from conftest import AGENT, TESTS, LineServer

# CI installs requirements-test.txt: there a missing package fails, never skips
_need = importlib.import_module if os.environ.get("CI") else pytest.importorskip
_need("torch")  # the kernel's cells make torch tensors
_need("ipykernel")  # a real kernel is the point of these tests
_need("jupyter_client")


class Kernel:
    def __init__(self, km: Any, kc: Any) -> None:
        self.km = km
        self.kc = kc

    def run(self, code: str, timeout: float = 120) -> dict[str, Any]:
        out: dict[str, Any] = {"stdout": "", "stderr": "", "result": None, "error": None}

        def hook(msg: dict[str, Any]) -> None:
            t, c = msg["msg_type"], msg["content"]
            if t == "stream":
                out[c["name"]] += c["text"]
            elif t == "execute_result":
                out["result"] = c["data"].get("text/plain")
            elif t == "error":
                out["error"] = f"{c['ename']}: {c['evalue']}"

        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        out["count"] = reply["content"].get("execution_count")
        out["status"] = reply["content"]["status"]
        if out["status"] == "error" and out["error"] is None:
            # a UsageError is printed to stderr, not sent as an error message
            out["error"] = f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}"
        return out

    def ok(self, code: str) -> dict[str, Any]:
        r = self.run(code)
        assert r["status"] == "ok" and r["error"] is None, (code, r)
        return r

    def value(self, expr: str) -> Any:
        """expr evaluated in the kernel, through JSON and stdout (so it
        leaves no trace in the output history)."""
        r = self.ok(f"import json as _j; print(_j.dumps({expr}))")
        return json.loads(r["stdout"].strip().splitlines()[-1])


@pytest.fixture(scope="module")
def server() -> Iterator[LineServer]:
    d = tempfile.mkdtemp(prefix="gtk")  # short: a socket path has at most 107 bytes
    srv = LineServer(os.path.join(d, "g.sock"))
    yield srv
    srv.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def kernel(server: LineServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    from jupyter_client.manager import KernelManager

    home = tmp_path_factory.mktemp("ipython")
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join([str(AGENT), str(TESTS), env.get("PYTHONPATH", "")]),
        "GPUTOP_HOLDERS_DEVICE": "cpu",
        "GPUTOP_SOCKET": server.path,
        "IPYTHONDIR": str(home),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "PYTHONWARNINGS": "ignore",
    })
    env.pop("GPUTOP", None)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(home))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        k = Kernel(km, kc)
        k.ok("import torch, weakref, sys")
        r = k.run("%load_ext gputop")
        assert r["status"] == "ok" and r["error"] is None, r
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def frames(server: LineServer, kind: str) -> list[dict[str, Any]]:
    return [f for f in (json.loads(x) for x in server.lines()) if f.get("type") == kind]


def test_magics_are_registered(kernel: Kernel) -> None:
    names = kernel.value("sorted(get_ipython().magics_manager.magics['line'])")
    assert {"gputop", "gpusnap", "gpuholders", "gpucleanup"} <= set(names)


def test_holders_table_names_variables_and_output_history(kernel: Kernel) -> None:
    kernel.ok("model = torch.nn.Linear(500, 400)\nx = torch.randn(1000, 1000)")
    t = kernel.ok("torch.ones(300, 300)")
    assert t["result"] is not None and t["result"].startswith("tensor(")
    kernel.ok("'hello'")
    lst = kernel.ok("[torch.zeros(100, 100), 1]")
    kernel.ok("42")
    out = kernel.ok("%gpuholders")["stdout"]
    assert out.startswith("gputop holders on cpu: ")
    rows = out.splitlines()
    assert any(re.search(r"\bparameters\s+model\b", r) for r in rows), out
    assert any(re.search(r"\bvariable\s+x\b", r) for r in rows), out
    hist = [r for r in rows if "ipython_history" in r]
    assert hist and "Out history" in hist[0], out
    # the hint names the entries: the ones with tensors, and only those
    assert f"Out[{t['count']}], Out[{lst['count']}]" in out, out
    assert "%gpucleanup" in out
    # 300*300 + 100*100 float32
    assert re.search(r"390\.6 KiB\s+2\s+ipython_history", out), out


def test_gpucleanup_drops_only_tensor_entries_of_the_history(kernel: Kernel) -> None:
    a = kernel.ok("torch.full((200, 200), 7.0)")["count"]
    s = kernel.ok("'keep me'")["count"]
    b = kernel.ok("{'w': torch.ones(50), 'n': 3}")["count"]
    m = kernel.ok("torch.nn.Linear(64, 64)")["count"]  # a module: it contains tensors
    n = kernel.ok("12345")["count"]
    kernel.ok(f"wa, wb, wm = weakref.ref(Out[{a}]), weakref.ref(Out[{b}]['w']), "
              f"weakref.ref(Out[{m}].weight)")
    before = set(kernel.value("sorted(Out)"))
    assert {a, s, b, m, n} <= before
    r = kernel.ok("%gpucleanup")
    assert "gputop: dropped " in r["stdout"], r
    assert f"Out[{a}]" in r["stdout"] and f"Out[{b}]" in r["stdout"] and f"Out[{m}]" in r["stdout"]
    assert "Cleanup complete" in r["stdout"]
    after = set(kernel.value("sorted(Out)"))
    dropped = before - after
    assert {a, b, m} <= dropped
    # everything without a tensor is still there
    assert {s, n} <= after
    assert all(kernel.value(f"type(Out[{k}]).__name__") != "Tensor" for k in after)
    assert kernel.value(f"Out[{s}]") == "keep me" and kernel.value(f"_{s}") == "keep me"
    assert kernel.value(f"_{n}") == 12345
    for k in (a, b, m):
        assert not kernel.value(f"'_{k}' in globals()")
    # and the memory is really free: nothing else in IPython kept them
    assert kernel.value("[wa() is None, wb() is None, wm() is None]") == [True, True, True]
    # variables are not history: x and model are untouched
    assert kernel.value("[tuple(x.shape), model.out_features]") == [[1000, 1000], 400]
    out = kernel.ok("%gpuholders")["stdout"]
    assert "ipython_history" not in out, out


def test_underscore_is_dropped_only_when_it_is_the_history_value(kernel: Kernel) -> None:
    kernel.ok("torch.ones(10)")
    assert kernel.value("type(_).__name__") == "Tensor"
    kernel.ok("%gpucleanup")
    assert kernel.value("_") == ""
    # a user's own `_` is theirs
    kernel.ok("_ = torch.ones(11)")
    kernel.ok("%gpucleanup")
    assert kernel.value("tuple(_.shape)") == [11]


def test_stored_exception_is_named_and_dropped(kernel: Kernel) -> None:
    kernel.ok("def train():\n"
              "    global W\n"
              "    activations = torch.ones(1_000_000)\n"
              "    W = weakref.ref(activations)\n"
              "    raise RuntimeError('diverged at step 3')\n")
    r = kernel.run("train()")
    assert r["status"] == "error" and "diverged" in r["error"]
    out = kernel.ok("%gpuholders")["stdout"]
    row = [line for line in out.splitlines() if "traceback" in line and "sys.last_traceback" in line]
    assert row and "3.8 MiB" in row[0], out
    assert "frames of the failed call (train())" in out and "%gpucleanup" in out
    r = kernel.ok("%gpucleanup --keep-history")
    assert "dropped the stored exception" in r["stdout"] and "sys.last_traceback" in r["stdout"]
    assert kernel.value("W() is None"), "the failed call's frame is still alive"
    out = kernel.ok("%gpuholders")["stdout"]
    assert "traceback" not in out, out


def test_attach_snapshots_and_per_cell_marks(kernel: Kernel, server: LineServer) -> None:
    kernel.ok("from fakegpu import FakeGPU\ngpu = FakeGPU(1)\ngpu.install()\n"
              "gpu.alloc(0, 5 << 20)")
    r = kernel.ok("%gputop --cells")
    assert f"streaming to {server.path}" in r["stdout"], r
    assert 'a snapshot "cell N" follows every executed cell' in r["stdout"]
    assert server.wait(lambda: frames(server, "hello"))
    c1 = kernel.ok("gpu.alloc(0, 3 << 20)")["count"]
    c2 = kernel.ok("y = 1")["count"]
    assert server.wait(lambda: {f"cell {c1}", f"cell {c2}"} <= {m["label"] for m in frames(server, "mark")})
    mk = {m["label"]: m for m in frames(server, "mark")}
    assert mk[f"cell {c1}"]["devs"][0]["allocated"] == 8 << 20
    r = kernel.ok("%gpusnap after training")
    assert "gputop: snapshot 'after training': cuda:0 allocated 8.0 MiB" in r["stdout"], r
    assert server.wait(lambda: "after training" in {m["label"] for m in frames(server, "mark")})
    kernel.ok("%gputop --no-cells")
    c3 = kernel.ok("y = 2")["count"]
    kernel.ok("%gpusnap 'marker after c3'")
    assert server.wait(lambda: "marker after c3" in {m["label"] for m in frames(server, "mark")})
    assert f"cell {c3}" not in {m["label"] for m in frames(server, "mark")}


def test_holders_request_from_gputop_is_answered_by_the_kernel(kernel: Kernel, server: LineServer) -> None:
    kernel.ok("held_for_gputop = torch.ones(4096)")
    assert server.wait(lambda: frames(server, "hello"))
    server.send(0, b'{"type":"request","what":"holders","id":41}\n')
    assert server.wait(lambda: [h for h in frames(server, "holders") if h.get("id") == 41], 30)
    h = [h for h in frames(server, "holders") if h.get("id") == 41][0]
    g = [g for g in h["groups"] if g["name"] == "held_for_gputop"]
    assert g and g[0]["bytes"] == 4096 * 4 and g[0]["kind"] == "variable"
    assert h["total"] == sum(x["bytes"] for x in h["groups"])


def test_cleanup_magic_runs_gputop_cleanup(kernel: Kernel, server: LineServer) -> None:
    kernel.ok("%gpucleanup")
    assert server.wait(lambda: {"Before cleanup", "After cleanup"} <= {
        m["label"] for m in frames(server, "mark")})
    assert "empty_cache" in kernel.value("gpu.log")


def test_bad_arguments_are_usage_errors(kernel: Kernel) -> None:
    r = kernel.run("%gpuholders --top many")
    assert r["status"] == "error" and "--top wants a number" in (r["error"] or ""), r
    r = kernel.run("%gpusnap")
    assert r["status"] == "error" and "a label is needed" in (r["error"] or ""), r
    r = kernel.run("%gputop --bogus")
    assert r["status"] == "error" and "unknown option --bogus" in (r["error"] or ""), r


def test_unload_removes_the_magics(kernel: Kernel) -> None:
    kernel.ok("%unload_ext gputop")
    names = kernel.value("sorted(get_ipython().magics_manager.magics['line'])")
    assert not {"gputop", "gpusnap", "gpuholders", "gpucleanup"} & set(names)
    kernel.ok("%load_ext gputop")
    assert "gpuholders" in kernel.value("sorted(get_ipython().magics_manager.magics['line'])")
