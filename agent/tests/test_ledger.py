"""The ledger (issue #26, the agent's part): what a process's allocated
bytes are made of at a row, from the walk of the live tensors.

CPU tensors stand for CUDA ones (GPUTOP_HOLDERS_DEVICE=cpu): the fake GPU
gives each storage a block of the pretend allocator at the storage's own
address (Onto below), so the walk, the blocks and the counters run for
real. Every expected figure is worked out here from the model, the
optimizer and a saved_tensors_hooks pack hook (numel x element size, each
storage once), apart from the agent's code. The tensors mapped are
multiples of 512 bytes, so that a pretend block (rounded to 512 as CUDA's)
never runs into a neighbouring CPU allocation."""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import threading
from typing import Any

import pytest
from conftest import LineServer
from fakegpu import CUBLAS_WORKSPACE, FakeGPU

import gputop
from gputop import _holders, _wire
from gputop.integrations._rows import Rows

torch = (importlib.import_module if os.environ.get("CI") else pytest.importorskip)("torch")
nn = torch.nn

PARTS = ("params", "grads", "optimizer", "activations", "other_tensors", "workspace")


class Onto:
    """Puts CPU tensors on the fake GPU: each storage one block, once. Keeps
    the tensors, so that no address is reused while the test runs."""

    def __init__(self, gpu: FakeGPU) -> None:
        self.gpu = gpu
        self.seen: set[int] = set()
        self.keep: list[Any] = []

    def __call__(self, *ts: Any) -> None:
        for t in ts:
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            ptr, n = st.data_ptr(), st.nbytes()
            if not ptr or ptr in self.seen or n % 512:
                continue  # not a multiple of 512: it stays off the pretend GPU
            self.seen.add(ptr)
            self.keep.append(t)
            self.gpu.tensor_block(0, t)


def once(tensors: Any) -> int:
    """numel x element size of each storage, each storage once."""
    seen: dict[int, int] = {}
    for t in tensors:
        seen[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()
    return sum(seen.values())


def valid(led: dict[str, Any]) -> dict[str, Any]:
    """A ledger as wire/check.go's checkLedger takes it: encoded by the
    schema, the parts within allocated, allocated within reserved, the
    texts within their bounds."""
    line = _wire.encode({"type": "mark", "t": 1, "label": "x", "devs": [{"dev": 0, "allocated": 0, "reserved": 0,
                                                                         "peak": 0, "ledger": led}]})
    assert json.loads(line)["devs"][0]["ledger"]["allocated"] == led["allocated"]
    assert sum(led[p] for p in PARTS) <= led["allocated"] <= led["reserved"], led
    assert len(led.get("uncounted", ())) <= 8, led
    assert all(len(u.encode()) <= 256 for u in led.get("uncounted", ())), led
    assert len(led.get("skipped", "").encode()) <= 256
    return led


def ledger(label: str = "Epoch 1", **kw: Any) -> dict[str, Any]:
    return valid(gputop.snapshot(label, **kw)[0]["ledger"])


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGPU:
    """The fake GPU, CPU tensors walked as its tensors, and a bound no
    loaded CI machine reaches (the bound has a test of its own)."""
    monkeypatch.setenv(_holders.ENV_DEVICE, "cpu")
    monkeypatch.setattr(_holders, "LEDGER_LIMIT_S", 60.0, raising=False)
    g = FakeGPU(1)
    g.install()
    return g


def make(norm: bool = True) -> Any:
    """An MLP whose tensors are all multiples of 512 bytes (norm=False:
    without the LayerNorm, whose saved mean and rstd are 128 bytes)."""
    torch.manual_seed(0)
    if not norm:
        return nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128))
    return nn.Sequential(nn.Linear(128, 256), nn.LayerNorm(256), nn.ReLU(), nn.Linear(256, 128))


def train_step(model: Any, opt: Any, x: Any) -> None:
    if opt is not None:
        opt.zero_grad()
    model(x).pow(2).mean().backward()
    if opt is not None:
        opt.step()


# ---- the parts, exactly ----

def test_params_grads_and_optimizer_state_to_the_byte(gpu: FakeGPU):
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 128)
    train_step(model, opt, x)
    params = list(model.parameters())
    grads = [p.grad for p in params]
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    onto = Onto(gpu)
    onto(*params, *grads, *state, x)
    led = ledger()
    assert led["params"] == once(params) == (128 * 256 + 256 + 2 * 256 + 256 * 128 + 128) * 4
    assert led["grads"] == once(grads) == led["params"]
    assert led["optimizer"] == once(state) == led["params"]  # one momentum buffer per parameter
    assert led["other_tensors"] == once([x]) and led["activations"] == 0 and led["workspace"] == 0
    # every block is one of those storages: nothing is left unattributed
    assert sum(led[p] for p in PARTS) == led["allocated"] == gpu.c[0]["allocated"]
    assert led["reserved"] == gpu.c[0]["reserved"] and led["took_ms"] > 0


def test_a_process_with_no_optimizer(gpu: FakeGPU):
    model = make()
    x = torch.randn(32, 128)
    train_step(model, None, x)
    params = list(model.parameters())
    Onto(gpu)(*params, *(p.grad for p in params), x)
    led = ledger()
    assert (led["params"], led["grads"], led["optimizer"]) == (once(params), once(params), 0)
    assert sum(led[p] for p in PARTS) == led["allocated"]


def test_a_parameter_in_the_optimizers_state_counts_once_as_a_parameter(gpu: FakeGPU):
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 128)
    train_step(model, opt, x)
    params = list(model.parameters())
    first = params[0]
    opt.state[first]["shadow"] = first  # the parameter itself, kept in the state
    opt.state[first]["ema"] = first.detach().clone()  # and state of its own
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v is not first]
    onto = Onto(gpu)
    onto(*params, *(p.grad for p in params), *state, x)
    led = ledger()
    assert led["params"] == once(params)
    assert led["optimizer"] == once(state) == once(params) + once([first])  # momentum, and the ema
    assert sum(led[p] for p in PARTS) == led["allocated"]


def test_shared_storages_views_and_tied_weights_count_once(gpu: FakeGPU):
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(256, 128)
            self.body = nn.Linear(128, 128)
            self.head = nn.Linear(128, 256, bias=False)
            self.head.weight = self.emb.weight  # tied: one parameter, two modules
            self.register_buffer("scale", torch.ones(128))

    model = Tied()
    flat = model.body.weight.view(-1)  # a view, held on its own
    alias = torch.empty(0).set_(model.body.weight.untyped_storage())  # another tensor, the same storage
    twice = [model.emb.weight, {"again": model.emb.weight}]  # reached twice
    tensors = list(model.parameters()) + list(model.buffers())
    Onto(gpu)(*tensors)
    led = ledger()
    assert len(tensors) == 4  # emb (= head), body weight and bias, scale
    assert led["params"] == once(tensors) == (256 * 128 + 128 * 128 + 128 + 128) * 4
    assert led["other_tensors"] == 0 and led["allocated"] == led["params"]
    del flat, alias, twice


def test_a_model_no_root_reaches_still_counts_as_parameters(gpu: FakeGPU):
    def keeper(model: Any, t: Any) -> Any:
        return lambda: (model, t)  # closure cells: the walk does not open them

    model = make()
    x = torch.randn(32, 128)
    train_step(model, None, x)
    params = list(model.parameters())
    loose = torch.randn(1024)
    Onto(gpu)(*params, *(p.grad for p in params), loose)
    hidden = keeper(model, loose)
    del model, params, loose
    led = ledger()
    want = (128 * 256 + 256 + 2 * 256 + 256 * 128 + 128) * 4
    # found by the pass over every tensor: nn.Parameters are parameters, their .grad gradients
    assert (led["params"], led["grads"], led["other_tensors"]) == (want, want, 4096)
    assert led["allocated"] == 2 * want + 4096
    del hidden


def test_tensor_subclasses_count_their_inner_tensors(gpu: FakeGPU):
    two = importlib.import_module("torch.testing._internal.two_tensor")
    a, b = torch.randn(128), torch.randn(128)
    p = nn.Parameter(two.TwoTensor(a, b))  # a wrapper: its own storage holds nothing
    Onto(gpu)(a, b)
    led = ledger()
    assert led["params"] == once([a, b]) == 1024
    del p


# ---- activations ----

class Saved:
    """A saved_tensors_hooks pack hook that counts what autograd saves, each
    storage once, leaving out the parameters (their part comes first)."""

    def __init__(self, params: list[Any]) -> None:
        self.params = {p.untyped_storage().data_ptr() for p in params}
        self.bytes: dict[int, int] = {}
        self.tensors: list[Any] = []

    def pack(self, t: Any) -> Any:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.params:
            self.bytes[ptr] = t.untyped_storage().nbytes()
            self.tensors.append(t)
        # the same storage, without t's graph: an output saved by its own
        # node would otherwise keep that graph alive in a cycle
        return t.detach()

    @property
    def total(self) -> int:
        return sum(self.bytes.values())


def test_activations_of_a_forward_held_before_backward_equal_what_autograd_saved(gpu: FakeGPU):
    model = make(norm=False)
    params = list(model.parameters())
    x = torch.randn(32, 128)
    saved = Saved(params)
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
        loss = model(x).pow(2).mean()
    onto = Onto(gpu)
    onto(*params, *saved.tensors)
    saved.tensors.clear()  # only the graph holds them now
    # the input, the first Linear's output (GELU's input), GELU's output (the
    # second Linear's input), that Linear's output (pow's input)
    assert len(saved.bytes) == 4 and saved.total == 32 * (128 + 256 + 256 + 128) * 4
    led = ledger()
    assert led["activations"] == saved.total
    assert led["params"] == once(params) and led["grads"] == 0
    loss.backward()
    del loss
    led = ledger("after backward")
    assert led["activations"] == 0  # backward freed what the graph saved: now only variables hold it
    assert led["other_tensors"] + led["activations"] <= saved.total


def test_activations_without_hooks_are_what_a_pack_hook_counts(gpu: FakeGPU):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    model = make(norm=False)
    params = list(model.parameters())
    x = torch.randn(32, 128)
    counted = Saved(params)
    with torch.autograd.graph.saved_tensors_hooks(counted.pack, lambda t: t):
        model(x).pow(2).mean()  # the same forward, counted, then let go
    onto = Onto(gpu)
    onto(*params, x)

    class Allocates(TorchDispatchMode):
        """Every tensor an op makes gets its block, as on a GPU."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            onto(*(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)))
            return out

    with Allocates():
        loss = model(x).pow(2).mean()
    led = ledger()
    # the graph saved the same tensors as the counted forward; what else the
    # ops made (kept alive by the mapping) is other tensors
    assert led["activations"] == counted.total
    made = once([t for t in onto.keep if t.untyped_storage().data_ptr() not in counted.params])
    assert led["activations"] + led["other_tensors"] == made
    del loss


# ---- bounds and bad input ----

def test_past_its_bound_the_ledger_is_skipped_and_says_why(gpu: FakeGPU, monkeypatch):
    x = torch.randn(32, 128)
    Onto(gpu)(x)
    monkeypatch.setattr(_holders, "LEDGER_LIMIT_S", 0.0, raising=False)
    led = ledger()
    assert led["skipped"].startswith("the walk took longer than its 0 ms bound and was stopped after")
    assert "ledger=False" in led["skipped"]
    assert all(led[k] == 0 for k in ("allocated", "reserved", *PARTS)) and led["took_ms"] > 0
    # an end row's walk keeps the verdict's limit
    monkeypatch.setattr(_holders, "WALK_LIMIT_S", 0.0)
    got = gputop.snapshot("After cleanup")[0]
    assert got["held"]["skipped"] and "bound" in valid(got["ledger"])["skipped"]


def test_the_default_bound_is_200_ms():
    assert _holders.LEDGER_LIMIT_S == 0.2 and _holders.WALK_LIMIT_S == 2.0


def outside(led: dict[str, Any]) -> int:
    """How many tensors the ledger says are in no live block (here: the
    process's CPU tensors that are not on the pretend GPU, and those freed)."""
    for u in led.get("uncounted", ()):
        m = re.match(r"(\d+) tensors? \([^)]*\) in no live block of torch's allocator: freed during the walk", u)
        if m:
            return int(m.group(1))
    return 0


def test_a_tensor_freed_during_the_walk_is_said(monkeypatch):
    monkeypatch.setenv(_holders.ENV_DEVICE, "cpu")
    monkeypatch.setattr(_holders, "LEDGER_LIMIT_S", 60.0, raising=False)
    g = FakeGPU(1)
    kept, gone = torch.randn(256), torch.randn(1024)
    read = g.live_blocks
    armed = threading.Event()

    def blocks(dev: int) -> list[tuple[int, int, int]]:
        # another thread frees gone's block after the walk saw its tensor
        if armed.is_set() and gone.untyped_storage().data_ptr() in g.blocks[dev]:
            g.free_block(dev, gone.untyped_storage().data_ptr())
        return read(dev)

    monkeypatch.setattr(g, "live_blocks", blocks)
    g.install()
    Onto(g)(kept, gone)
    before = ledger()
    assert before["other_tensors"] == 1024 + 4096
    armed.set()
    led = ledger()
    assert led["other_tensors"] == 1024 and led["allocated"] == 1024
    assert outside(led) == outside(before) + 1, (before, led)


def test_what_the_walk_cannot_read_or_count_is_said(gpu: FakeGPU):
    from torch._subclasses.fake_tensor import FakeTensorMode

    class BrokenDict:
        @property
        def __dict__(self) -> Any:  # type: ignore[override]
            raise ZeroDivisionError("no dict")

    broken = BrokenDict()
    meta = torch.empty(1 << 20, device="meta")
    with FakeTensorMode():
        fake = torch.empty(4096)
    x = torch.randn(256)
    Onto(gpu)(x)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fake tensor's data_ptr() warns: never asked
        led = ledger()
    assert led["other_tensors"] == 1024
    text = " | ".join(led["uncounted"])
    assert "skipped (attributes that raised" in text, text
    assert "with no memory of their own (meta or fake: FakeTensor, meta)" in text, text
    del broken, meta, fake


def test_tensors_freed_under_a_running_walk_never_break_it(gpu: FakeGPU):
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        pool: list[Any] = []
        try:
            while not stop.is_set():
                pool.append(torch.ones(256))
                if len(pool) > 50:
                    del pool[:25]
                pool[-1].untyped_storage().resize_(0)  # storage freed under a live tensor
        except BaseException as e:
            errors.append(e)

    x = torch.randn(256)
    Onto(gpu)(x)
    th = threading.Thread(target=churn)
    th.start()
    try:
        for _ in range(3):
            led = ledger()
            assert led["other_tensors"] == 1024
    finally:
        stop.set()
        th.join()
    assert not errors


def test_the_arithmetic_never_counts_past_allocated():
    from gputop._holders import _ledger

    rng = random.Random(7)
    for _ in range(300):
        blocks, addr = [], 1 << 20
        for _ in range(rng.randrange(0, 12)):
            addr += rng.choice((0, 512, 4096))
            size = rng.choice((512, 1024, 8192, CUBLAS_WORKSPACE))
            blocks.append((addr, size, size if rng.random() < 0.2 else size - 7))
            addr += size
        st = []
        for _ in range(rng.randrange(0, 20)):
            if blocks and rng.random() < 0.8:
                a, size, _ = rng.choice(blocks)
                ptr = a + rng.choice((0, 0, 64, size - 64))
            else:
                ptr = rng.randrange(1 << 20, addr + 1)  # in no block
            st.append((ptr, rng.choice((4, 512, 2048, 10_000)), rng.randrange(5)))
        allocated = sum(b[1] for b in blocks)
        for bl in (blocks, None):
            fig, notes = _ledger.count(bl, st, {CUBLAS_WORKSPACE}, allocated, allocated + rng.randrange(4096))
            assert sum(fig[p] for p in PARTS) <= fig["allocated"] <= fig["reserved"], (bl, st, fig)
            valid({"t": 1, **fig})


def test_a_block_counts_once_in_the_first_part_that_claims_it():
    from gputop._holders import _ledger

    blocks = [(1000, 2048, 2000), (4096, 1024, 1024), (8192, 512, 512), (1 << 20, CUBLAS_WORKSPACE, CUBLAS_WORKSPACE)]
    st = [(1000, 2000, _ledger.OTHER), (1000, 1500, _ledger.OPTIMIZER), (1500, 100, _ledger.PARAMS),
          (4096, 1000, _ledger.ACTIVATIONS), (9000, 64, _ledger.GRADS)]
    fig, notes = _ledger.count(blocks, st, {CUBLAS_WORKSPACE}, 0, 0)
    # the first block: a param inside it wins it, for the bytes its storages cover
    assert fig["params"] == 2000 and fig["optimizer"] == fig["other_tensors"] == 0
    assert fig["activations"] == 1000 and fig["grads"] == 0 and fig["workspace"] == CUBLAS_WORKSPACE
    assert fig["allocated"] == fig["reserved"] == 2048 + 1024 + 512 + CUBLAS_WORKSPACE
    assert notes == ["1 tensor (64 B) in no live block of torch's allocator: freed during the walk, "
                     "or memory torch did not allocate"]


def test_uncounted_is_bounded():
    from gputop._holders import _ledger

    led = _ledger.finish({"allocated": 0, "reserved": 0}, [f"note {i} " + "x" * 300 for i in range(12)], 1, 2.0)
    assert len(led["uncounted"]) == 8 and all(len(u.encode()) <= 256 for u in led["uncounted"])
    assert led["uncounted"][-1] == "and 5 more things the walk could not count"


# ---- which rows carry one ----

def marks(server: LineServer, n: int) -> list[dict[str, Any]]:
    assert server.wait(lambda: len([x for x in server.lines() if b'"type":"mark"' in x]) >= n, 10)
    return [f for f in (json.loads(x) for x in server.lines()) if f["type"] == "mark"]


def test_labelled_rows_carry_a_ledger_and_step_rows_only_when_asked(server: LineServer, gpu: FakeGPU):
    x = torch.randn(256)
    Onto(gpu)(x)
    gputop.attach(rate_hz=50)
    rows = Rows(every_n_steps=1)
    rows.snap("Training start")
    rows.step(1)
    asked = Rows(every_n_steps=1, ledger_every_step=True)
    asked.step(2)
    gputop.snapshot("Epoch 1")
    gputop.snapshot("quiet", ledger=False)
    with gputop.phase("eval"):
        pass
    got = {m["label"] + {"phase_start": " (start)", "phase_end": " (end)"}.get(m.get("kind", ""), ""): m
           for m in marks(server, 7)}
    has = {k: "ledger" in m["devs"][0] for k, m in got.items()}
    assert has == {"Training start": True, "Step 1": False, "Step 2": True, "Epoch 1": True, "quiet": False,
                   "eval (start)": True, "eval (end)": True}, has
    led = got["Epoch 1"]["devs"][0]["ledger"]
    assert valid(led)["other_tensors"] == 1024 and led["allocated"] == got["Epoch 1"]["devs"][0]["allocated"]


def test_a_holders_answer_carries_the_same_walks_ledger(server: LineServer, gpu: FakeGPU):
    model = make()
    params = list(model.parameters())
    Onto(gpu)(*params)
    gputop.attach(rate_hz=50)
    assert server.wait(lambda: server.lines(0))
    server.send(0, b'{"type":"request","what":"holders","id":7,"dev":0}\n')
    assert server.wait(lambda: any(b'"type":"holders"' in x for x in server.lines()), 30)
    h = next(f for f in (json.loads(x) for x in server.lines()) if f["type"] == "holders")
    led = valid(h["ledger"])
    assert h["id"] == 7 and h["dev"] == 0 and led["params"] == once(params) == led["allocated"]
    assert h["held"]["python"] == led["allocated"]  # the same walk's attribution
    assert not led.get("skipped")
