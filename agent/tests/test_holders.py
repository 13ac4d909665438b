"""gputop.holders(): who keeps the memory alive.

The walk is the same for every device type, so these tests run it on CPU
tensors (device="cpu") with real torch modules, optimizers and autograd
graphs. The article's six scenarios each run in a fresh interpreter, as a
script whose globals are the user's namespace; each asserts that the top
holder names the culprit and that after the fix the hint suggests (and
gc) the holder is gone.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from typing import Any

import pytest

from conftest import AGENT, child_env

# CI installs requirements-test.txt: there a missing torch fails, never skips
torch = (importlib.import_module if os.environ.get("CI") else pytest.importorskip)("torch")

from gputop import _holders  # noqa: E402
from gputop._holders import holders  # noqa: E402


# ---- the article's scenarios, each in a fresh process ----

PRELUDE = textwrap.dedent('''
    import gc, json, sys
    import torch
    import torch.nn as nn
    from gputop._holders import holders

    torch.manual_seed(0)

    def report(tag):
        r = holders("cpu")
        print("REPORT " + json.dumps({"tag": tag, "skipped": r.skipped, "total": r.total,
                                       "groups": [g.as_dict() for g in r.groups],
                                       "error": r.error}), flush=True)

    def make():
        return nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))

    PARAM_BYTES = sum(p.numel() * 4 for p in make().parameters())
    criterion = nn.CrossEntropyLoss()
    report("baseline")
''')


def run_scenario(body: str) -> dict[str, dict[str, Any]]:
    code = PRELUDE + textwrap.dedent(body)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=child_env(), timeout=300, cwd=str(AGENT))
    assert p.returncode == 0, p.stderr[-4000:]
    out: dict[str, dict[str, Any]] = {}
    for line in p.stdout.splitlines():
        if line.startswith("REPORT "):
            r = json.loads(line[len("REPORT "):])
            assert r["error"] is None, r
            out[r["tag"]] = r
    return out


def names(r: dict[str, Any]) -> list[str]:
    return [g["name"] for g in r["groups"]]


def group(r: dict[str, Any], name: str) -> dict[str, Any]:
    for g in r["groups"]:
        if g["name"] == name:
            return g
    raise AssertionError(f"no group {name!r} in {names(r)}")


def test_a_model_and_optimizer_never_deleted() -> None:
    rs = run_scenario('''
        model = make()
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(3):
            x = torch.randn(256, 1000)
            y = torch.randint(0, 10, (256,))
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        report("trained")
        del model, optimizer
        gc.collect()
        report("fix1")
        del loss
        gc.collect()
        report("fix2")
    ''')
    base, r = rs["baseline"], rs["trained"]
    top = r["groups"][0]
    assert top["name"] == "optimizer (Adam)" and top["kind"] == "optimizer_state"
    assert "exp_avg" in top["hint"] and "del optimizer" in top["hint"]
    assert "exp_avg_sq" in top["hint"]
    m = group(r, "model")
    assert m["kind"] == "parameters"
    param_bytes = m["bytes"]
    assert m["tensors"] == 6 and "float32[512, 1000]" in m["examples"]
    assert m["hint"] == "model and its optimizer are still referenced: del model, optimizer; gputop.cleanup()"
    assert top["bytes"] >= 2 * param_bytes  # exp_avg + exp_avg_sq
    g = group(r, "model (.grad)")
    assert g["kind"] == "gradients" and g["bytes"] == param_bytes
    # the fix it suggests: model and optimizer are gone, and the parameters
    # that the last loss's autograd graph still reaches are named next
    f1 = rs["fix1"]
    assert "model" not in names(f1) and "optimizer (Adam)" not in names(f1)
    lg = group(f1, "loss")
    assert lg["kind"] == "autograd_graph" and lg["bytes"] >= param_bytes
    assert "del loss" in lg["hint"] and "6 parameters" in lg["hint"]
    f2 = rs["fix2"]
    assert "loss" not in names(f2)
    # what is left: the last batch (x, y) the loop variables still name
    assert set(names(f2)) <= {"x", "y"}
    assert f2["total"] - base["total"] == 256 * 1000 * 4 + 256 * 8


def test_b_model1_then_model2() -> None:
    rs = run_scenario('''
        def train(model):
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for _ in range(2):
                opt.zero_grad()
                criterion(model(torch.randn(64, 1000)), torch.randint(0, 10, (64,))).backward()
                opt.step()

        model1 = make()
        train(model1)
        model2 = make()
        report("both")
        del model1
        gc.collect()
        report("fixed")
    ''')
    r = rs["both"]
    assert r["groups"][0]["name"].startswith("model1")
    m1, m2 = group(r, "model1"), group(r, "model2")
    assert m1["kind"] == m2["kind"] == "parameters"
    assert m1["bytes"] == m2["bytes"] > 2_000_000
    assert "del model1" in m1["hint"]
    assert group(r, "model1 (.grad)")["bytes"] == m1["bytes"]
    f = rs["fixed"]
    assert not [n for n in names(f) if n.startswith("model1")]
    assert group(f, "model2")["bytes"] == m2["bytes"]
    assert r["total"] - f["total"] == 2 * m1["bytes"]


def test_c_losses_list_with_grad_fn() -> None:
    rs = run_scenario('''
        model = make()
        optimizer = torch.optim.Adam(model.parameters())
        losses = []
        for step in range(3):
            optimizer.zero_grad()
            loss = criterion(model(torch.randn(256, 1000)), torch.randint(0, 10, (256,)))
            loss.backward()
            optimizer.step()
            losses.append(loss)
        for step in range(10):  # validation without torch.no_grad()
            loss = criterion(model(torch.randn(256, 1000)), torch.randint(0, 10, (256,)))
            losses.append(loss)
        del loss
        report("leak")
        losses = [l.item() for l in losses]
        gc.collect()
        report("fixed")
    ''')
    r = rs["leak"]
    top = r["groups"][0]
    assert top["name"] == "losses" and top["kind"] == "container"
    assert top["hint"].startswith("losses holds 13 loss tensors with grad_fn")
    assert top["hint"].endswith("append loss.item()")
    # the 10 validation graphs keep each batch and its activations
    assert top["bytes"] >= 10 * (256 * 1000 + 256 * 512 + 256 * 256) * 4
    assert "float32[256, 1000]" in top["examples"]
    f = rs["fixed"]
    assert "losses" not in names(f)
    assert r["total"] - f["total"] == top["bytes"]


def test_d_inference_without_no_grad() -> None:
    rs = run_scenario('''
        model = nn.Sequential(nn.Linear(1000, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                              nn.Linear(2048, 10))
        model.eval()
        batch = torch.randn(2048, 1000)
        preds = model(batch)
        report("leak")
        preds = preds.detach()
        gc.collect()
        report("fixed")
        with torch.no_grad():
            preds = model(batch)
        report("no_grad")
    ''')
    r = rs["leak"]
    top = r["groups"][0]
    assert top["name"] == "preds" and top["kind"] == "autograd_graph"
    assert "torch.no_grad()" in top["hint"] and "preds = preds.detach()" in top["hint"]
    # two ReLU outputs of 2048 x 2048 float32, plus preds itself
    assert top["bytes"] == 2 * 2048 * 2048 * 4 + 2048 * 10 * 4
    assert group(r, "batch")["kind"] == "variable"
    for tag in ("fixed", "no_grad"):
        f = rs[tag]
        assert not f["groups"] or all(g["kind"] != "autograd_graph" for g in f["groups"])
        p = group(f, "preds")
        assert p["kind"] == "variable" and p["bytes"] == 2048 * 10 * 4
        assert r["total"] - f["total"] == 2 * 2048 * 2048 * 4


def test_e_second_reference() -> None:
    rs = run_scenario('''
        model = make()
        ref = model
        del model
        gc.collect()
        report("leak")
        del ref
        gc.collect()
        report("fixed")
    ''')
    r, f, base = rs["leak"], rs["fixed"], rs["baseline"]
    top = r["groups"][0]
    assert top["name"] == "ref" and top["kind"] == "parameters"
    assert top["hint"] == "ref (Sequential) is still referenced: del ref; gputop.cleanup()"
    assert "ref" not in names(f)
    assert f["total"] == base["total"]


def test_f_exception_kept_by_last_traceback() -> None:
    rs = run_scenario('''
        def train():
            model = make()
            opt = torch.optim.Adam(model.parameters())
            for step in range(10):
                x = torch.randn(256, 1000)
                opt.zero_grad()
                loss = criterion(model(x), torch.randint(0, 10, (256,)))
                loss.backward()
                opt.step()
                if step == 3:
                    raise RuntimeError("loss diverged")

        try:
            train()
        except RuntimeError:
            # what the interactive interpreter and IPython do with an uncaught error
            sys.last_type, sys.last_value, sys.last_traceback = sys.exc_info()
            if sys.version_info >= (3, 12):
                sys.last_exc = sys.last_value
        report("leak")
        del sys.last_type, sys.last_value, sys.last_traceback
        if sys.version_info >= (3, 12):
            del sys.last_exc
        gc.collect()
        report("fixed")
    ''')
    r, f, base = rs["leak"], rs["fixed"], rs["baseline"]
    top = r["groups"][0]
    assert top["name"] == "sys.last_traceback" and top["kind"] == "traceback"
    assert "(train())" in top["hint"]
    assert "del sys.last_type, sys.last_value, sys.last_traceback" in top["hint"]
    # parameters, grads, Adam's two moments, and the last batch
    assert top["bytes"] >= 4 * 2_585_640 + 256 * 1000 * 4
    assert top["tensors"] >= 6 * 4 + 1
    assert "sys.last_traceback" not in names(f)
    assert f["total"] == base["total"]


# ---- the walk itself, in this process ----

def test_named_by_attribute_path_and_container() -> None:
    class Trainer:
        def __init__(self) -> None:
            self.model = torch.nn.Linear(300, 200)
            self.history = [torch.randn(50) for _ in range(4)]
            self.best = torch.zeros(10, 10)

    class Slotted:
        __slots__ = ("t", "unset")

    trainer = Trainer()
    cache = {"a": torch.ones(100), "b": (torch.ones(7), 3)}
    slotted = Slotted()
    slotted.t = torch.ones(13)
    r = holders("cpu")
    fn = "test_named_by_attribute_path_and_container()"
    g = r.find(f"trainer.model in {fn}")
    assert g is not None and g.kind == "parameters" and g.bytes == (300 * 200 + 200) * 4
    assert g.hint.startswith(f"trainer.model (Linear) is a local of {fn}")
    h = r.find(f"trainer.history in {fn}")
    assert h is not None and h.kind == "container" and h.tensors == 4 and h.bytes == 4 * 50 * 4
    b = r.find(f"trainer.best in {fn}")
    assert b is not None and b.kind == "variable" and b.examples == ["float32[10, 10]"]
    c = r.find(f"cache in {fn}")
    assert c is not None and c.kind == "container" and c.bytes == 107 * 4
    s = r.find(f"slotted.t in {fn}")
    assert s is not None and s.bytes == 13 * 4
    del trainer, cache, slotted


def test_views_share_their_storage() -> None:
    base = torch.zeros(1000, 100)
    views = [base[i * 10:(i + 1) * 10] for i in range(100)]
    flat = base.view(-1)
    r = holders("cpu")
    fn = "test_views_share_their_storage()"
    g = r.find(f"base in {fn}")
    assert g is not None and g.bytes == 1000 * 100 * 4 and g.tensors == 1
    # the views name the same storage: it is counted once, for base
    assert r.find(f"views in {fn}") is None and r.find(f"flat in {fn}") is None
    assert sum(x.bytes for x in r.groups if fn in x.name) == 400_000
    del views, flat


def test_frame_locals_are_not_kept_alive() -> None:
    t = torch.randn(1000)
    ref = weakref.ref(t)
    r = holders("cpu")
    assert r.find("t in test_frame_locals_are_not_kept_alive()") is not None
    del t
    assert ref() is None, "holders() kept a local alive through the frame's f_locals"


def test_saved_tensor_hooks_are_not_run() -> None:
    calls = {"pack": 0, "unpack": 0}

    def pack(t: Any) -> Any:
        calls["pack"] += 1
        return ("offloaded", t.clone())

    def unpack(p: Any) -> Any:
        calls["unpack"] += 1
        return p[1]

    w = torch.randn(64, 64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (torch.randn(32, 64) @ w).relu().sum()
    packed = calls["pack"]
    r = holders("cpu")
    assert calls["unpack"] == 0, "holders() ran a saved-tensor unpack hook"
    assert calls["pack"] == packed
    g = r.find("y in test_saved_tensor_hooks_are_not_run()")
    assert g is not None and g.kind == "autograd_graph"
    y.backward()
    assert w.grad is not None and calls["unpack"] > 0


def test_checkpointed_graph_is_not_recomputed() -> None:
    from torch.utils.checkpoint import checkpoint

    runs = {"n": 0}
    lin = torch.nn.Linear(128, 128)

    def block(x: Any) -> Any:
        runs["n"] += 1
        return lin(x).relu()

    out = checkpoint(block, torch.randn(16, 128, requires_grad=True), use_reentrant=False).sum()
    assert runs["n"] == 1
    holders("cpu")
    assert runs["n"] == 1, "holders() made checkpoint recompute the forward"
    out.backward()  # still works: nothing was unpacked early
    assert runs["n"] == 2 and lin.weight.grad is not None


def test_unnamed_tensor_gets_a_referrer_guess() -> None:
    class Cache:
        pass

    import types

    mod = types.ModuleType("some_library")
    mod.table = torch.ones(300_000)  # big enough to earn a referrer pass
    sys.modules["some_library"] = mod
    try:
        keep = [Cache()]
        keep[0].entries = [torch.ones(777)]
        gc.collect()
        r = holders("cpu")
        g = [x for x in r.by_kind("other") if x.bytes == 300_000 * 4]
        assert g and g[0].name == "held by some_library.table", [x.name for x in r.groups]
        assert "gc.get_referrers" in g[0].hint
        # reached through keep[0].entries: a container of the test's local
        h = r.find("keep in test_unnamed_tensor_gets_a_referrer_guess()")
        assert h is not None and h.bytes == 777 * 4
    finally:
        del sys.modules["some_library"]
    del keep


def test_result_shape_matches_the_wire_frame() -> None:
    x = torch.randn(10, 10)
    r = holders("cpu")
    d = r.as_dict()
    assert set(d) == {"dev", "total", "skipped", "groups", "took_ms"}
    assert d["total"] == sum(g["bytes"] for g in d["groups"]) == r.total
    json.dumps(d)
    for g in d["groups"]:
        assert {"kind", "name", "bytes", "tensors"} <= set(g) <= {
            "kind", "name", "bytes", "tensors", "examples", "hint"}
        assert g["kind"] in {"parameters", "gradients", "optimizer_state", "variable", "container",
                             "autograd_graph", "ipython_history", "traceback", "other"}
        assert len(g.get("examples", [])) <= 3
    assert r.groups == sorted(r.groups, key=lambda g: -g.bytes)  # (on CUDA the remainder goes last)
    text = str(r)
    assert text.startswith("gputop holders on cpu: ") and "x in test_result_shape" in text
    assert repr(r) == text
    del x


def test_top_merges_the_rest() -> None:
    a, b, c = torch.zeros(1000), torch.zeros(500), torch.zeros(100)
    full = holders("cpu")
    r = holders("cpu", top=1)
    assert len(r.groups) == 2 and r.groups[1].name == f"{len(full.groups) - 1} more groups"
    assert r.total == full.total
    del a, b, c


def test_holders_report_is_the_wire_frame() -> None:
    x = torch.ones(64)
    d = _holders.holders_report("cpu")
    assert {"dev", "total", "skipped", "groups", "took_ms"} <= set(d)
    assert "type" not in d and "t" not in d
    assert any(g["name"] == "x in test_holders_report_is_the_wire_frame()" for g in d["groups"])
    del x


def test_holders_report_runs_on_the_main_thread() -> None:
    seen: list[str] = []
    real = _holders.holders

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*a, **kw)

    big = torch.ones(4321)
    box: dict[str, Any] = {}
    th = threading.Thread(target=lambda: box.update(r=_holders.holders_report("cpu", timeout=30)),
                          name="agent")
    _holders.holders = spy  # type: ignore[assignment]
    try:
        th.start()
        while th.is_alive():  # the main thread is busy in Python, as a training loop is
            sum(range(1000))
    finally:
        _holders.holders = real  # type: ignore[assignment]
    th.join()
    assert seen == ["MainThread"]
    assert any(g["name"] == "big in test_holders_report_runs_on_the_main_thread()"
               and g["bytes"] == 4321 * 4 for g in box["r"]["groups"])
    del big


def test_holders_report_when_the_main_thread_is_parked() -> None:
    big = torch.ones(999)
    box: dict[str, Any] = {}
    done = threading.Event()

    seen: list[str] = []
    real = _holders.holders

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*a, **kw)

    def agent() -> None:
        main = threading.main_thread().ident
        where, still = None, 0
        while still < 5:  # the main thread sits on one line of threading's wait
            time.sleep(0.01)
            fr = sys._current_frames()[main]
            now = (fr.f_globals.get("__name__"), fr.f_code.co_name, fr.f_lineno)
            still = still + 1 if now == where and now[:2] == ("threading", "wait") else 0
            where = now
        box["r"] = _holders.holders_report("cpu", timeout=0.2)
        done.set()

    _holders.holders = spy  # type: ignore[assignment]
    try:
        threading.Thread(target=agent, name="agent").start()
        # parked inside threading's wait: no bytecode runs here, nor autograd
        assert done.wait(30)
    finally:
        _holders.holders = real  # type: ignore[assignment]
    assert seen == ["agent"]
    assert any(g["name"] == "big in test_holders_report_when_the_main_thread_is_parked()"
               for g in box["r"]["groups"])
    del big


def test_holders_report_when_the_main_thread_is_inside_torch() -> None:
    box: dict[str, Any] = {}
    lk = threading.Lock()
    lk.acquire()

    def agent() -> None:
        main = threading.main_thread().ident
        while sys._current_frames()[main].f_globals.get("__name__") != "torch._pretend_backward":
            time.sleep(0.001)
        box["r"] = _holders.holders_report("cpu", timeout=0.2)
        lk.release()

    threading.Thread(target=agent).start()
    # blocked in C under a frame of torch's, as loss.backward() is
    exec("assert lk.acquire(timeout=30)", {"__name__": "torch._pretend_backward", "lk": lk})
    groups = box["r"]["groups"]
    assert [g["name"] for g in groups] == ["main thread busy"]
    assert "ask again" in groups[0]["hint"] and box["r"]["total"] == 0


def test_cuda_without_cuda_is_empty_not_an_error() -> None:
    r = holders("cuda")
    assert r.error is None and r.groups == [] and r.total == 0


def test_env_knob_sets_the_default_device(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.ones(3)
    monkeypatch.setenv(_holders.ENV_DEVICE, "cpu")
    r = holders()
    assert r.device == "cpu" and r.find("x in test_env_knob_sets_the_default_device()")
    monkeypatch.delenv(_holders.ENV_DEVICE)
    assert holders().device == "cuda"
    del x


def test_bad_device_is_reported_not_raised() -> None:
    r = holders("cuda:zero")
    assert r.error is not None and "cuda:zero" in r.error and r.groups == []
    assert "walk failed" in r.table()


def test_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from gputop._holders import holders, holders_report\n"
            "r = holders('cpu'); print(r.error); print(holders_report('cpu')['groups'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=child_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "torch is not installed"
    assert "holders walk failed" in p.stdout


def test_torch_not_imported_is_not_imported() -> None:
    code = ("import sys\n"
            "from gputop._holders import holders\n"
            "r = holders('cpu'); print(r.error, r.groups, 'torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=child_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["None", "[]", "False"]


# ---- bad input ----

class Hostile:
    """Every attribute access raises, even __class__."""

    def __init__(self, t: Any) -> None:
        object.__setattr__(self, "t", t)

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} for you")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} for you")


class BrokenDict:
    """Its __dict__ itself raises."""

    @property
    def __dict__(self) -> Any:  # type: ignore[override]
        raise ZeroDivisionError("no dict")


class BadHash:
    def __hash__(self) -> int:
        raise TypeError("unhashable at the worst moment")

    def __eq__(self, other: object) -> bool:
        raise TypeError("no comparing")


class WeirdDevice(torch.Tensor):
    @property
    def device(self) -> Any:  # type: ignore[override]
        raise RuntimeError("device is unknowable")


def test_objects_whose_attribute_access_raises() -> None:
    hostile = Hostile(torch.ones(111))
    broken = BrokenDict()
    keyed = {("k", 1): torch.ones(5)}
    weird = torch.ones(17).as_subclass(WeirdDevice)
    plain = torch.ones(33)
    odd = [BadHash(), torch.ones(9)]
    r = holders("cpu")
    fn = "test_objects_whose_attribute_access_raises()"
    assert r.error is None
    # __dict__ is read without __getattribute__, so even this one is found
    g = r.find(f"hostile.t in {fn}")
    assert g is not None and g.bytes == 111 * 4
    assert r.find(f"plain in {fn}") is not None
    assert r.skipped >= 2  # BrokenDict.__dict__, WeirdDevice.device
    assert r.find(f"keyed in {fn}") is not None
    assert r.find(f"odd in {fn}").bytes == 9 * 4  # type: ignore[union-attr]
    del hostile, broken, keyed, weird, plain, odd


def test_huge_containers_are_bounded() -> None:
    big = [0.5] * 300_000 + [torch.ones(2048)]
    bigd = {i: float(i) for i in range(50_000)}
    bigd["t"] = torch.ones(3)
    r = holders("cpu", max_items=10_000)
    fn = "test_huge_containers_are_bounded()"
    assert r.error is None
    assert r.skipped >= (300_001 - 10_000) + (50_001 - 10_000)
    # the tensors past the bound are still counted, as held by something unnamed
    other = [g for g in r.by_kind("other") if g.bytes == 2048 * 4]
    assert other, [g.name for g in r.groups]
    assert r.find(f"big in {fn}") is None
    full = holders("cpu", max_items=400_000)
    assert full.find(f"big in {fn}") is not None and full.find(f"bigd in {fn}") is not None
    del big, bigd


def test_reference_cycles() -> None:
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    a.t = torch.ones(64)
    loop: list[Any] = [torch.ones(32)]
    loop.append(loop)
    d: dict[str, Any] = {}
    d["self"] = d
    d["t"] = torch.ones(16)
    r = holders("cpu")
    fn = "test_reference_cycles()"
    assert r.find(f"a.t in {fn}").bytes == 64 * 4  # type: ignore[union-attr]
    assert r.find(f"loop in {fn}").bytes == 32 * 4  # type: ignore[union-attr]
    assert r.find(f"d in {fn}").bytes == 16 * 4  # type: ignore[union-attr]
    # each storage once, in one group
    assert sum(g.bytes for g in r.groups if fn in g.name) == (64 + 32 + 16) * 4
    del a, b, loop, d


def test_tensors_freed_during_the_walk() -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        pool: list[Any] = []
        try:
            while not stop.is_set():
                pool.append(torch.ones(256))
                if len(pool) > 50:
                    del pool[:25]
                t = pool[-1]
                t.untyped_storage().resize_(0)  # storage freed under a live tensor
        except BaseException as e:
            errors.append(e)

    th = threading.Thread(target=churn)
    th.start()
    try:
        for _ in range(5):
            r = holders("cpu")
            assert r.error is None
            assert r.total == sum(g.bytes for g in r.groups) >= 0
    finally:
        stop.set()
        th.join()
    assert not errors


def test_emptied_and_sparse_storages() -> None:
    gone = torch.ones(1000)
    gone.untyped_storage().resize_(0)
    sp = torch.sparse_coo_tensor(torch.tensor([[0, 1], [2, 3]]), torch.tensor([1.0, 2.0]), (4, 4),
                                 check_invariants=True)
    r = holders("cpu")
    fn = "test_emptied_and_sparse_storages()"
    assert r.find(f"gone in {fn}") is None
    g = r.find(f"sp in {fn}")
    assert g is not None and g.bytes == 2 * 2 * 8 + 2 * 4
    del gone, sp


def test_format_bytes() -> None:
    fb = _holders.format_bytes
    assert fb(0) == "0 B" and fb(1023) == "1023 B" and fb(1024) == "1.0 KiB"
    assert fb(3 * 1024 ** 2 + 1024 ** 2 // 2) == "3.5 MiB" and fb(5 * 1024 ** 3) == "5.0 GiB"


def test_print_table(capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.ones(5)
    holders("cpu", print_table=True)
    out = capsys.readouterr().out
    assert out.startswith("gputop holders on cpu:") and "x in test_print_table()" in out
    assert "x in test_print_table() is a cpu tensor" not in out  # locals say when they go
    assert "released when test_print_table() returns" in out
    del x


def test_holds_device_tensors() -> None:
    m = torch.nn.Linear(2, 2)
    assert _holders.holds_device_tensors(m, "cpu")
    assert _holders.holds_device_tensors([1, {"a": torch.ones(1)}], "cpu")
    assert not _holders.holds_device_tensors([1, "x", {"a": 2.0}], "cpu")
    assert not _holders.holds_device_tensors(m, "cuda")
    assert not _holders.holds_device_tensors(Hostile(1), "cpu")


# ---- owners that frameworks put in between ----

def test_framework_owners_are_named_in_the_hints() -> None:
    rs = run_scenario('''
        # stand-ins named as the frameworks name their classes (recognised by
        # class name and module, never by importing a framework)
        Trainer = type("Trainer", (), {"__module__": "transformers.trainer"})
        SFTTrainer = type("SFTTrainer", (Trainer,), {"__module__": "trl.trainer.sft_trainer"})
        LTrainer = type("Trainer", (), {"__module__": "lightning.pytorch.trainer.trainer"})

        class DistributedDataParallel(nn.Module):
            def __init__(self, module):
                super().__init__()
                self.module = module

        trainer = SFTTrainer()
        trainer.model = make()
        trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.1, momentum=0.9)
        criterion(trainer.model(torch.randn(8, 1000)), torch.randint(0, 10, (8,))).backward()
        trainer.optimizer.step()
        fit = LTrainer()
        fit.strategy = type("Strategy", (), {})()
        fit.strategy.model = make()
        ddp = DistributedDataParallel(make())
        report("owners")
    ''')
    r = rs["owners"]
    m = group(r, "trainer.model")
    assert m["hint"].startswith("trainer (a Hugging Face Trainer) keeps its model trainer.model") and \
        "del trainer; gputop.cleanup()" in m["hint"], m
    o = group(r, "trainer.optimizer (SGD)")
    assert o["hint"].startswith("trainer (a Hugging Face Trainer) keeps its optimizer trainer.optimizer"), o
    lm = group(r, "fit.strategy.model")
    assert lm["hint"].startswith("fit (a Lightning Trainer) keeps its model fit.strategy.model"), lm
    d = group(r, "ddp")
    assert "DDP also keeps gradient buckets as large as the gradients" in d["hint"], d


def test_parameters_only_torch_compile_keeps_are_named() -> None:
    rs = run_scenario('''
        def hide(model):
            return lambda: model  # what a compiled artefact's closure does

        model = make()
        compiled = torch.compile(model, backend="eager")
        compiled(torch.randn(4, 1000))
        kept = hide(model)
        del model, compiled
        gc.collect()
        report("kept")
    ''')
    r = rs["kept"]
    hidden = [g for g in r["groups"] if g["kind"] == "other" and "torch.compiler.reset()" in g["hint"]]
    assert hidden and sum(g["bytes"] for g in hidden) == _param_bytes(), r["groups"]
    assert hidden[0]["hint"].endswith("torch.compile's caches keep them after the model is gone: "
                                      "torch.compiler.reset(); gputop.cleanup()")


def _param_bytes() -> int:
    return (1000 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10) * 4
