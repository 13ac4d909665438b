#!/usr/bin/env python3
"""The ledger on a real GPU: what each row says the process's memory is
made of, against what this script works out from the model, the optimizer
and autograd, and what taking it costs.

    PYTHONPATH=agent python3 bench/ledger_check.py [--results-dir DIR] [--workdir DIR]

The frames are read where the agent sends them: the children attach to a
socket this script listens on (as layout_check.py does). Every expected
figure is worked out in the training process apart from the agent's code:
numel x element size of the model's parameters and buffers, of their
.grad and of the optimizer's state on the GPU, each storage once; the
bytes a torch.autograd.graph.saved_tensors_hooks pack hook sees saved,
each storage once, the parameters' left out; NVML's figure for the process
from nvidia-smi right after the row.

  article      the reference article's program (bench/workloads/article.py,
               --nvml): at each of its rows (Training start ... After
               cleanup) params, grads and optimizer equal the trainer's to
               the byte, activations 0 (no forward is held at a row), and
               unattributed (allocated minus the parts) under 1% of NVML's
               figure for the process;
  transformer  a GPT-2-small-sized transformer (12 layers, d=768, vocab
               50304, 1024 tokens; tied embeddings; AdamW fused) compiled
               with torch.compile and trained ~110 steps in bf16: params,
               grads and optimizer equal to the byte at every row; an eager
               float32 forward held before backward: activations equal what
               a pack hook counted on the same forward; unattributed under
               1% of NVML's figure; the ledger's cost at a row (took_ms and
               snapshot()'s wall time, median and p99, against snapshot()
               with ledger=False); steps between rows not slowed: blocks of
               steps after a row with its ledger and after one without, in
               ABBA order, within 0.5% at the median.

Results: NAME-article, NAME-exact (params, grads, optimizer of the
transformer), NAME-activations, NAME-unattributed, NAME-overhead
(PASS/FAIL), NAME-cost (INFO). A table of them is printed last; the
children's logs in --workdir.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import Listener, parts_parser, run_parts  # noqa: E402

MIB = 1 << 20
PARTS = ("params", "grads", "optimizer", "activations", "other_tensors", "workspace")
EXACT = ("params", "grads", "optimizer")
UNATTRIBUTED_LIMIT = 0.01  # of NVML's figure for the process
OVERHEAD_LIMIT = 0.005  # steps between rows, median, with the ledger against without
GPT2 = {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab": 50304, "block": 1024}  # GPT-2 small, as nanoGPT


# ---------------------------------------------------------------- figures


def unattributed(led: dict) -> int:
    """What the parts leave of the allocated bytes (gputop's unattributed)."""
    return led["allocated"] - min(sum(led.get(p, 0) for p in PARTS), led["allocated"])


def compare(what: str, led: dict | None, want: dict, nvml: int | None, activations: int | None = 0) -> list[str]:
    """Where a row's ledger differs from the figures worked out apart."""
    if not led:
        return [f"{what}: no ledger"]
    if led.get("skipped"):
        return [f"{what}: skipped: {led['skipped']}"]
    bad = [f"{what}: {k} {led.get(k, 0)} B, worked out {want[k]} B" for k in EXACT if led.get(k, 0) != want[k]]
    if activations is not None and led.get("activations", 0) != activations:
        bad.append(f"{what}: activations {led.get('activations', 0)} B, want {activations} B")
    if sum(led.get(p, 0) for p in PARTS) > led["allocated"] or led["allocated"] > led["reserved"]:
        bad.append(f"{what}: the parts exceed allocated or allocated exceeds reserved: {led}")
    if nvml is None:
        bad.append(f"{what}: no NVML figure for the process (nvidia-smi)")
    elif unattributed(led) > UNATTRIBUTED_LIMIT * nvml:
        bad.append(f"{what}: unattributed {unattributed(led) / MIB:.1f} MiB, more than 1% of NVML's "
                   f"{nvml / MIB:.0f} MiB")
    return bad


def pct(v: list[float], q: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def nvml_used(pid: int) -> int | None:
    """NVML's figure for process pid, bytes (nvidia-smi gives MiB); the only
    compute process when pid is not listed (another pid namespace)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_smi(out, pid)


def process_used(torch) -> int | None:
    """NVML's figure for this process; where nvidia-smi does not give it,
    the device's used memory (cudaMemGetInfo: every process on the GPU,
    more than this one's)."""
    got = nvml_used(os.getpid())
    if got is None:
        free, total = torch.cuda.mem_get_info()
        got = total - free
    return got


def parse_smi(out: str, pid: int) -> int | None:
    got = {}
    for line in out.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) == 2 and f[0].isdigit() and f[1].isdigit():
            got[int(f[0])] = int(f[1]) * MIB
    if pid in got:
        return got[pid]
    return next(iter(got.values())) if len(got) == 1 else None


# ---------------------------------------------------------------- the transformer


def gpt(torch, n_layer: int = 12, n_head: int = 12, n_embd: int = 768, vocab: int = 50304, block: int = 1024):
    """nanoGPT's model, plain torch: tied token embedding and head, causal
    attention through scaled_dot_product_attention."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in self.c_attn(x).split(n_embd, 2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(n_embd), Attention(), nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight  # tied, as GPT-2

        def forward(self, idx, targets):
            pos = torch.arange(idx.size(1), device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.h:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def parts_of(torch, model, opt, device: str = "cuda") -> dict:
    """numel x element size of the model's parameters and buffers, their
    .grad and the optimizer's state on the device type, each storage once
    (state that is a parameter counts as one)."""

    def once(ts) -> int:
        seen: dict = {}
        for t in ts:
            if isinstance(t, torch.Tensor) and t.device.type == device:
                seen[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()
        return sum(seen.values())

    params = list(model.parameters()) + list(model.buffers())
    mine = {p.untyped_storage().data_ptr() for p in params}
    state = [v for st in (opt.state.values() if opt is not None else ()) for v in st.values()
             if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() not in mine]
    return {"params": once(params), "grads": once(p.grad for p in params if p.grad is not None),
            "optimizer": once(state)}


class PackCount:
    """A saved_tensors_hooks pack hook: the bytes autograd saves on the
    device, each storage once, the parameters left out (their part comes
    first in the ledger)."""

    def __init__(self, params, device: str = "cuda") -> None:
        self.skip = {p.untyped_storage().data_ptr() for p in params}
        self.device = device
        self.seen: dict = {}

    def pack(self, t):
        if t.device.type == self.device:
            st = t.untyped_storage()
            if st.data_ptr() not in self.skip:
                self.seen[st.data_ptr()] = st.nbytes()
        # not t itself: an output saved by its own node would then refer to
        # its graph, a cycle that outlives the forward
        return t.detach()

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def child(part: str, sock: str) -> dict:
    """The transformer, in a process of its own; returns what it worked out."""
    import torch

    import gputop

    dev = os.environ.get("LEDGER_CHECK_DEVICE", "cuda")  # another: a rehearsal of this code off the GPU
    cfg = GPT2
    vocab, T = cfg["vocab"], cfg["block"]
    gputop.attach(socket=sock, layout_rate=0)  # no periodic reading to blur the step times
    torch.zeros(1, device=dev)
    t0 = time.time()
    while not (gputop.status().get("connected") and gputop.status().get("devices")) and time.time() - t0 < 10:
        time.sleep(0.05)
    steps = int(os.environ.get("LEDGER_CHECK_STEPS", "30"))
    batch = int(os.environ.get("LEDGER_CHECK_BATCH", "16"))
    torch.manual_seed(0)
    model = gpt(torch, **cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    params = list(model.parameters())
    out: dict = {"pid": os.getpid(), "torch_version": torch.__version__, "batch": batch, "tokens": T, "rows": {}}

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    def row(label: str, ledger: bool = True) -> float:
        """A row; what it must say, NVML's figure after it (with the ledger
        or not, so that rows of both kinds pause the GPU alike); its wall
        time."""
        sync()
        want = parts_of(torch, model, opt, dev)
        t = time.perf_counter()
        gputop.snapshot(label, ledger=ledger)
        took = time.perf_counter() - t
        out["rows"][label] = {"want": want, "ledger": ledger, "nvml": process_used(torch), "wall_ms": took * 1e3}
        return took

    row("Training start")

    # activations: an eager float32 forward counted by a pack hook, then the
    # same forward held before backward, at a row
    idx = torch.randint(0, vocab, (4, T), device=dev)
    tgt = torch.randint(0, vocab, (4, T), device=dev)
    count = PackCount(params, dev)
    with torch.autograd.graph.saved_tensors_hooks(count.pack, lambda t: t):
        model(idx, tgt)
    out["saved_bytes"], out["saved_storages"] = count.total, len(count.seen)
    del count
    loss = model(idx, tgt)
    row("forward held")
    del loss, idx, tgt

    fast = torch.compile(model)
    x = torch.randint(0, vocab, (batch, T), device=dev)
    y = torch.randint(0, vocab, (batch, T), device=dev)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = fast(x, y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(6):  # compile, warm up
        step()
    times: dict[str, list[float]] = {"on": [], "off": []}
    for k in range(8):
        on = k % 4 in (0, 3)  # ABBA ABBA
        row(f"block {k}", ledger=on)
        sync()
        for _ in range(steps):
            t = time.perf_counter()
            step()
            times["on" if on else "off"].append(time.perf_counter() - t)
    out["times"] = times
    walls: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(30):  # the row's cost, with its ledger and without
        step()
        on = i % 3 != 2
        walls["on" if on else "off"].append(row(f"cost {i}", ledger=on) * 1e3)
    out["walls_ms"] = walls
    gputop.detach()
    return out


# ---------------------------------------------------------------- the socket


def ledgers(srv: Listener, pid: int) -> dict[str, dict | None]:
    """label -> the first device's ledger of that row's mark (None: none)."""
    return {m.get("label", ""): ((m.get("devs") or [{}])[0].get("ledger")) for m in srv.of(pid, "mark")}

def run(a: argparse.Namespace, argv: list[str], srv: Listener, log: str) -> str:
    """Run a child with the agent from agent/ (stdout returned, stderr to log)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(REPO, "agent"), e.get("PYTHONPATH", "")) if p)
    for k in ("GPUTOP_LAYOUT_RATE", "GPUTOP_HISTORY", "GPUTOP_SOCKET", "GPUTOP_HOLDERS_DEVICE"):
        e.pop(k, None)
    with open(log, "w") as fh:
        try:
            p = subprocess.run([a.python, *argv], env=e, stdout=subprocess.PIPE, stderr=fh, text=True,
                               timeout=a.child_timeout, cwd=REPO)
        except subprocess.TimeoutExpired:
            fh.write(f"timed out after {a.child_timeout} s\n")
            return ""
        fh.write(p.stdout)
    time.sleep(0.3)  # the agent's last frames reach the socket
    return p.stdout


# ---------------------------------------------------------------- the checks


def check_article(a, srv, work) -> list[tuple[str, str, str, dict]]:
    out = os.path.join(work, "article.json")
    log = os.path.join(work, "article.log")
    run(a, [os.path.join(HERE, "workloads", "article.py"), "--socket", srv.path, "--out", out, "--nvml"], srv, log)
    try:
        with open(out) as f:
            got = json.load(f)
    except (OSError, ValueError):
        return [("article", "FAIL", f"the article's program failed ({log})", {})]
    leds = ledgers(srv, got["pid"])
    problems, worst, said = [], (0.0, "", 0), {}
    for r in got["rows"]:
        led = leds.get(r["label"])
        problems += compare(r["label"], led, r["expect"], r.get("nvml"))
        if led and not led.get("skipped") and r.get("nvml"):
            said[r["label"]] = (f"{r['label']}: {led['params'] / MIB:.2f} / {led['grads'] / MIB:.2f} / "
                                f"{led['optimizer'] / MIB:.2f} MiB, workspace {led['workspace'] / MIB:.0f} MiB")
            share = unattributed(led) / r["nvml"]
            if share >= worst[0]:
                worst = (share, r["label"], unattributed(led))
    if len(got["rows"]) < 7:
        problems.append(f"{len(got['rows'])} rows, want 7")
    shown = [said[k] for k in ("Epoch 10", "After cleanup") if k in said]
    txt = (f"{len(got['rows'])} rows, params / grads / optimizer equal to the trainer's to the byte at each"
           if not problems else f"{len(got['rows'])} rows") + (" (" + "; ".join(shown) + ")" if shown else "") + \
        f"; unattributed at most {worst[2] / 1024:.1f} KiB ({worst[0] * 100:.3f}% of NVML's figure, at {worst[1] or '?'})" + \
        ("" if not problems else "; " + "; ".join(problems[:6]))
    return [("article", "FAIL" if problems else "PASS", txt, {"problems": problems, "rows": got["rows"],
                                                              "ledgers": leds})]


def check_transformer(a, srv, work) -> list[tuple[str, str, str, dict]]:
    log = os.path.join(work, "transformer.log")
    stdout = run(a, [os.path.abspath(__file__), "--child", "transformer", "--socket", srv.path], srv, log)
    got = next((json.loads(line[7:]) for line in reversed(stdout.splitlines()) if line.startswith("RESULT ")), None)
    if got is None:
        return [(n, "FAIL", f"the transformer's child failed ({log})", {})
                for n in ("exact", "activations", "unattributed", "cost", "overhead")]
    return judge_transformer(got, ledgers(srv, got["pid"]))


def judge_transformer(got: dict, leds: dict[str, dict | None]) -> list[tuple[str, str, str, dict]]:
    """The transformer's results: what its child worked out (got) against
    the ledgers its rows carried (leds, by label)."""
    rows = got["rows"]
    out = []
    # params, grads, optimizer at every row that carries a ledger
    exact, over, worst = [], [], (0, "", 0)
    for label, r in rows.items():
        led = leds.get(label)
        if not r["ledger"]:
            if led is not None:
                exact.append(f"{label}: a ledger on a row taken with ledger=False")
            continue
        # no forward is held at a row but one: its activations are checked below
        for p in compare(label, led, r["want"], r["nvml"], None if label == "forward held" else 0):
            (over if "unattributed" in p or "NVML" in p else exact).append(p)
        if led and not led.get("skipped") and r["nvml"]:
            u = unattributed(led)
            if u / r["nvml"] >= worst[0] / max(worst[2], 1):
                worst = (u, label, r["nvml"])
    last = leds.get("block 0") or {}
    w = rows.get("block 0", {}).get("want", {})
    out.append(("exact", "FAIL" if exact else "PASS",
                f"{sum(1 for v in leds.values() if v)} rows with a ledger; at block 0 params {w.get('params', 0) / MIB:.1f}, "
                f"grads {w.get('grads', 0) / MIB:.1f}, optimizer {w.get('optimizer', 0) / MIB:.1f} MiB, activations "
                f"{last.get('activations', 0) / MIB:.1f}, other {last.get('other_tensors', 0) / MIB:.1f}, workspace "
                f"{last.get('workspace', 0) / MIB:.1f} MiB"
                + ("; params, grads and optimizer equal to the model's and the optimizer's to the byte at every row, "
                   "no activations between steps"
                   if not exact else "; " + "; ".join(exact[:6])), {"problems": exact, "rows": rows, "ledgers": leds}))
    # activations: the forward held before backward
    held = leds.get("forward held") or {}
    want = got["saved_bytes"]
    bad = [] if held.get("activations") == want and not held.get("skipped") else [
        f"activations {held.get('activations')} B, the pack hook counted {want} B ({held.get('skipped', '')})"]
    out.append(("activations", "FAIL" if bad else "PASS",
                f"an eager float32 forward (4 x {got['tokens']} tokens) held before backward: activations "
                f"{held.get('activations', 0) / MIB:.1f} MiB, the pack hook counted {want / MIB:.1f} MiB in "
                f"{got['saved_storages']} storages" + ("; equal to the byte" if not bad else "; " + "; ".join(bad)),
                {"problems": bad, "ledger": held, "saved_bytes": want}))
    # unattributed against NVML
    u, label, nv = worst
    out.append(("unattributed", "FAIL" if over or not label else "PASS",
                f"the most unattributed at a row: {u / MIB:.2f} MiB at {label or '?'}, {u / max(nv, 1) * 100:.3f}% of "
                f"NVML's {nv / MIB:.0f} MiB for the process (limit 1%)" + ("" if not over else "; " + "; ".join(over[:4])),
                {"problems": over}))
    # the cost of a row's ledger
    took = [v["took_ms"] for k, v in leds.items() if k.startswith(("cost", "block")) and v and "took_ms" in v]
    walls = got["walls_ms"]
    skipped = [k for k, v in leds.items() if v and v.get("skipped")]
    out.append(("cost", "INFO",
                f"a row's ledger took median {statistics.median(took):.2f} ms, p99 {pct(took, 0.99):.2f} ms "
                f"({len(took)} rows); snapshot() median {statistics.median(walls['on']):.2f} ms with it, "
                f"{statistics.median(walls['off']):.3f} ms without (p99 {pct(walls['on'], 0.99):.2f} / "
                f"{pct(walls['off'], 0.99):.3f} ms)" + (f"; skipped at {skipped}" if skipped else "")
                if took and walls["on"] and walls["off"] else f"no cost measured; skipped at {skipped}",
                {"took_ms": took, "walls_ms": walls}))
    # steps between rows
    t = got["times"]
    on, off = statistics.median(t["on"]), statistics.median(t["off"])
    over = on / off - 1
    # one-sided: the ledger must not slow the steps; a step faster after
    # rows with it is the host's noise (-0.72% in 120 + 120 steps on
    # 2026-12-02), reported as measured
    bad = [] if over <= OVERHEAD_LIMIT else [f"median step {over * 100:+.2f}%, limit +{OVERHEAD_LIMIT * 100:g}%"]
    out.append(("overhead", "FAIL" if bad else "PASS",
                f"compiled GPT-2-small, bf16, batch {got['batch']} x {got['tokens']}: median "
                f"step {off * 1e3:.1f} ms after rows without the ledger, {on * 1e3:.1f} ms after rows with it "
                f"({over * 100:+.2f}%; mean {(statistics.fmean(t['on']) / statistics.fmean(t['off']) - 1) * 100:+.2f}%), "
                f"{len(t['on'])} + {len(t['off'])} steps in ABBA blocks" + ("; " + "; ".join(bad) if bad else ""),
                {"problems": bad, "times": t}))
    return out


CHECKS = {"article": check_article, "transformer": check_transformer}


def dry_run() -> int:
    """Without a GPU: the socket, the bookkeeping, the comparisons, and the
    transformer's code on a small CPU model."""
    d = tempfile.mkdtemp(prefix="gputop-ledger-")
    srv = Listener(os.path.join(d, "s.sock"))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(srv.path)
    want = {"params": 4 * MIB, "grads": 4 * MIB, "optimizer": 8 * MIB}
    led = {"t": 1, "allocated": 16 * MIB + 4096, "reserved": 20 * MIB, **want, "activations": 0, "other_tensors": 0,
           "workspace": 0}
    c.sendall(json.dumps({"type": "hello", "pid": 7}).encode() + b"\n"
              + json.dumps({"type": "mark", "t": 1, "label": "Epoch 5", "devs": [{"dev": 0, "ledger": led}]}).encode()
              + b"\n")
    c.close()
    t0 = time.time()
    while not ledgers(srv, 7) and time.time() - t0 < 5:
        time.sleep(0.01)
    got = ledgers(srv, 7).get("Epoch 5")
    ok = got == led and not compare("dry", got, want, 100 * MIB)  # 4 KiB unattributed: under 1%
    ok = ok and compare("dry", got, dict(want, grads=1), 100 * MIB) != []
    ok = ok and compare("dry", dict(led, allocated=24 * MIB), want, 100 * MIB) != []  # 8 MiB: over 1%
    ok = ok and parse_smi("4242, 1500\n77, 20\n", 77) == 20 * MIB and parse_smi("9, 3\n", 1) == 3 * MIB
    srv.close()
    note = "torch not installed: the model's code not run"
    try:
        import torch

        m = gpt(torch, n_layer=2, n_head=2, n_embd=64, vocab=512, block=32)
        opt = torch.optim.AdamW(m.parameters())
        idx = torch.randint(0, 512, (2, 32))
        count = PackCount(list(m.parameters()), "cpu")
        with torch.autograd.graph.saved_tensors_hooks(count.pack, lambda t: t):
            m(idx, idx).backward()
        opt.step()
        p = parts_of(torch, m, opt, "cpu")
        ps = list(m.parameters())  # the tied weight once
        n = sum(x.numel() for x in ps) * 4
        # AdamW: exp_avg and exp_avg_sq as large as the parameters, a float32 step each
        right = p == {"params": n, "grads": n, "optimizer": 2 * n + 4 * len(ps)} and count.total > 0
        note = (f"the model's code ran on CPU ({n // 4:,} parameters, tied: {m.wte.weight is m.lm_head.weight}; "
                f"{p}; {count.total:,} bytes saved for backward)")
        ok = ok and right and m.wte.weight is m.lm_head.weight
    except ImportError:
        pass
    print(f"ledger_check.py: parts {', '.join(CHECKS)}; socket and comparisons {'ok' if ok else 'BROKEN'}; {note}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    a = parts_parser(__doc__, "36-ledger", list(CHECKS), ["transformer"], 170,
                     "the socket, the bookkeeping, the model's code").parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.socket)), flush=True)
        return 0
    if a.dry_run:
        return dry_run()
    return run_parts(a, CHECKS, "ledger")


if __name__ == "__main__":
    sys.exit(main())
