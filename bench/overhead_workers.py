"""The side of overhead.py that runs inside the measured process: the
training loops (the reference model's step, a GPU-bound bf16 MLP, a
compiled GPT-2-small-shaped transformer), the
naive stats thread, the timed segments with and without the agent, and
snapshot() latency with the tail of the recording that sees it land.

`overhead.py _worker ...` runs worker() in a process of its own, which
prints its result as one line: RESULT {json}. Imported by overhead.py; not
run on its own.
"""
from __future__ import annotations

import functools
import json
import os
import threading
import time

from common import Bare, call_times_ns, pcts, setup_cpu, thread_cpu_ns, thread_sched_ns

IDLE_HZ = 1 / 3600  # "idle": the attached agent's thread sleeps through the block


def setup_gpu(torch, nn, width: int = 8192, layers: int = 8, batch: int = 8192):
    """A transformer-sized bf16 MLP: each step is ~30 ms of matrix work."""
    dev = torch.device("cuda")
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width, bias=False), nn.GELU()]
    model = nn.Sequential(*mods).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, width, device=dev, dtype=torch.bfloat16)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    return step


def setup_compiled(torch, nn, layers: int = 12, d: int = 768, heads: int = 12, batch: int = 16,
                   seq: int = 1024, vocab: int = 50304, device: str = "cuda"):
    """A GPT-2-small-shaped transformer (causal, tied embeddings, fused
    AdamW) under torch.compile, bf16 autocast: ~35 ms a step on an H200.
    device="cpu": small shapes run it eagerly, for this code's own check."""
    dev = torch.device(device)

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            block = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.emb.weight
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, idx, tgt):
            x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            x = self.norm(self.blocks(x, mask=self.mask, is_causal=True))
            return nn.functional.cross_entropy(self.head(x).flatten(0, 1), tgt.flatten())

    model = GPT().to(dev)
    fast = torch.compile(model) if device == "cuda" else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda")
    x = torch.randint(0, vocab, (batch, seq), device=dev)
    y = torch.randint(0, vocab, (batch, seq), device=dev)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = fast(x, y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


class Naive(threading.Thread):
    """The usual trap: three stats dict rebuilds per sample."""

    def __init__(self, torch, hz: float) -> None:
        super().__init__(daemon=True)
        self.torch, self.period, self.n = torch, 1.0 / hz, 0
        self.halt = threading.Event()

    def run(self) -> None:
        c = self.torch.cuda
        nxt = time.perf_counter()
        while not self.halt.is_set():
            c.memory_allocated()
            c.memory_reserved()
            c.max_memory_allocated()
            self.n += 1
            nxt += self.period
            d = nxt - time.perf_counter()
            if d > 0:
                time.sleep(d)
            else:
                nxt = time.perf_counter()


def run_segment(torch, step, seconds: float) -> dict:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    times = []
    me = threading.get_native_id()
    s0 = thread_sched_ns(me)
    t0 = time.perf_counter_ns()
    end = t0 + int(seconds * 1e9)
    now = t0
    while now < end:
        step()
        t = time.perf_counter_ns()
        times.append(t - now)
        now = t
    total = now - t0
    s1 = thread_sched_ns(me)
    times.sort()
    r = {"steps": len(times), "mean_us": total / len(times) / 1e3,
         "median_us": times[len(times) // 2] / 1e3,
         "p90_us": times[int(len(times) * 0.9)] / 1e3}
    if s0 is not None and s1 is not None:
        # The training thread neither ran nor waited for a CPU: it slept,
        # in a CUDA sync or waiting for the GIL. What the agent adds to it is
        # its direct cost, with less noise than step times; the GPU may go on
        # with queued work meanwhile, so not all of it is lost.
        r["train_asleep_pct"] = round(
            (total - (s1[0] - s0[0]) - (s1[1] - s0[1])) / total * 100, 4)
    return r


def stats_call(on: bool) -> None:
    """Make the attached agent's ticks read through torch's stats call (as
    GPUTOP_DIRECT=0 does from the start), or in place again. The next batch
    of ticks (at most 100 ms away) takes it up."""
    from gputop import _backend
    d = getattr(_backend.get(), "direct", None)
    if d is None:
        return
    if on and not d.off:
        d.saved, d.views, d.off = d.views, {}, "paused by overhead.py"
    elif not on and d.off == "paused by overhead.py":
        d.views, d.off = d.saved, ""


def worker_train(a, torch, nn) -> dict:
    step = {"gpu": setup_gpu, "compiled": setup_compiled}.get(a.kind, lambda t, n: setup_cpu(t, n, a.device))(torch, nn)
    for _ in range(5):
        step()
    run_segment(torch, step, a.warm)
    gputop = None
    segs = []
    conds = a.conds.split(",")
    held = None  # the agent attached throughout for "on" / "idle"
    rate = {"rate_hz": a.rate} if a.rate else {}
    if {"on", "stats", "half", "idle"} & set(conds):
        import gputop
        held = gputop.attach(**rate)
        on_hz = held.rate_hz  # --rate, else attach()'s default
        time.sleep(0.5)
    for cond in conds:
        extra: dict = {}
        naive = None
        agent_tid = None
        if cond in ("read", "wake"):
            held.configure(rate_hz=IDLE_HZ)
            fn = None  # without CUDA (--device cpu, mechanics only) read is wake
            if cond == "read" and torch.cuda.is_available():
                fn = functools.partial(torch._C._cuda_memoryStats, torch.cuda.current_device())
            naive = Bare(on_hz, fn)
            naive.start()
            run_segment(torch, step, 0.05)
            agent_tid = naive.native_id
        elif cond in ("on", "stats", "half", "idle"):
            held.configure(rate_hz={"on": on_hz, "stats": on_hz, "half": on_hz / 2}.get(cond, IDLE_HZ))
            stats_call(cond == "stats")
            run_segment(torch, step, 0.2 if cond == "stats" else 0.05)  # the switch settles, untimed
            agent_tid = getattr(getattr(held, "_thread", None), "native_id", None)
        elif cond == "agent":
            import gputop
            ag = gputop.attach(**rate)
            time.sleep(0.5)  # connect, hello, first samples
            agent_tid = getattr(getattr(ag, "_thread", None), "native_id", None)
        elif cond.startswith("naive"):
            naive = Naive(torch, float(cond[5:]))
            naive.start()
            time.sleep(0.05)
        elif cond != "none":
            raise SystemExit(f"unknown condition {cond!r}")
        if naive is not None:
            naive.n = 0
        t_seg = time.perf_counter()
        cpu0 = thread_cpu_ns(agent_tid)
        r = run_segment(torch, step, a.seg)
        cpu1 = thread_cpu_ns(agent_tid)
        if cpu0 is not None and cpu1 is not None:
            # what the agent thread itself ran, per second of the segment:
            # the GIL time it can have taken from the training thread is at
            # most this (plus the hand-offs)
            extra["agent_thread_cpu_pct"] = round((cpu1 - cpu0) / 1e7 / (time.perf_counter() - t_seg), 3)
        if cond in ("on", "stats", "half"):
            extra["reading"] = held.status().get("reading")
            stats_call(False)
        if naive is not None:
            naive.halt.set()
            naive.join()
            extra["thread_hz"] = round(naive.n / (time.perf_counter() - t_seg), 1)
        if cond == "agent":
            st = gputop.status()
            extra.update({k: st.get(k) for k in ("connected", "samples_sent", "dropped",
                                                   "last_error", "reading")})
            gputop.detach()
        segs.append({"cond": cond, **r, **extra})
    if held is not None:
        st = gputop.status()
        held.detach()
        return {"pid": os.getpid(), "kind": a.kind, "segments": segs,
                "agent": {k: st.get(k) for k in ("connected", "samples_sent", "dropped", "last_error",
                                                  "reading")}}
    return {"pid": os.getpid(), "kind": a.kind, "segments": segs}


def time_calls(fn, n: int) -> dict:
    """n calls of fn back to back, in µs."""
    return pcts(call_times_ns(fn, n))


class Tail(threading.Thread):
    """Follows a growing recording and notes when each 'vis N' snapshot line lands."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path, self.seen, self.frame_t = path, {}, {}
        self.halt = threading.Event()
        self.fh = open(path, "rb")
        self.fh.seek(0, os.SEEK_END)

    def run(self) -> None:
        buf = b""
        while not self.halt.is_set():
            chunk = self.fh.read()
            if not chunk:
                time.sleep(0.0005)
                continue
            now = time.time_ns()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if b'"vis ' not in line:
                    continue
                try:
                    f = json.loads(line)
                except ValueError:
                    continue
                if f.get("type") == "snapshot" and str(f.get("label", "")).startswith("vis "):
                    self.seen.setdefault(f["label"], now)
                    self.frame_t.setdefault(f["label"], f.get("t"))


def worker_latency(a, torch) -> dict:
    out: dict = {"pid": os.getpid(), "kind": "latency"}
    torch.zeros(1, device="cuda")
    dev = torch.cuda.current_device()
    stats_fn = getattr(torch._C, "_cuda_memoryStats", None)
    out["stats_calls"] = {
        "memory_allocated": time_calls(lambda: torch.cuda.memory_allocated(dev), 2000),
        "memory_stats": time_calls(lambda: torch.cuda.memory_stats(dev), 2000),
        "three_naive_calls": time_calls(lambda: (torch.cuda.memory_allocated(dev),
                                                 torch.cuda.memory_reserved(dev),
                                                 torch.cuda.max_memory_allocated(dev)), 1000),
    }
    if stats_fn is not None:
        out["stats_calls"]["_cuda_memoryStats"] = time_calls(lambda: stats_fn(dev), 2000)

    import gputop
    gputop.attach()
    x = torch.randn(1024, 1024, device="cuda")  # something allocated, so values are not all 0
    time.sleep(1.0)
    # each call after a 5 ms pause, as a row between steps finds caches: and
    # torch's own calls timed the same way in the same loop, turn about, so
    # that the host's speed that hour falls on both (a pause makes a 20 µs
    # call 5-8 times slower, and the host's speed moves by 2.5x between days)
    timed = {
        "snapshot_call": lambda i: gputop.snapshot(f"lat {i}", ledger=False),  # the counters' row
        "memory_allocated_after_pause": lambda i: torch.cuda.memory_allocated(dev),
        "three_naive_calls_after_pause": lambda i: (torch.cuda.memory_allocated(dev),
                                                    torch.cuda.memory_reserved(dev),
                                                    torch.cuda.max_memory_allocated(dev)),
    }

    def after_pause(call, *args) -> int:
        """ns that call(*args) takes after a 5 ms pause"""
        time.sleep(0.005)
        t = time.perf_counter_ns()
        call(*args)
        return time.perf_counter_ns() - t

    def turn_about(suffix: str) -> None:
        lat: dict = {k: [] for k in timed}
        for i in range(a.snapshots):
            for k, call in timed.items():
                lat[k].append(after_pause(call, i))
        for k, v in lat.items():
            out[k + suffix] = pcts(v)

    turn_about("")
    # where a row's time goes: the pieces of gputop's take() on their own,
    # each after a pause as above
    from gputop import _backend, _lifecycle
    b, ag = _backend.get(), _lifecycle.current(auto=True)
    parts = {"counters (backend.read)": lambda: b.read(dev), "devices": b.devices,
             "memory cap (backend.limit)": lambda: b.limit(dev), "other frameworks": _backend.framework_devices,
             "layout (for_mark)": lambda: ag.layouts.for_mark([dev]) if ag is not None else None}
    out["parts_after_pause"] = {k: pcts([after_pause(call) for _ in range(100)]) for k, call in parts.items()}

    if a.rec and os.path.exists(a.rec):
        tail = Tail(a.rec)
        tail.start()
        calls = {}
        for i in range(a.visible):
            label = f"vis {i}"
            calls[label] = time.time_ns()
            gputop.snapshot(label, ledger=False)
            time.sleep(0.1)
        deadline = time.time() + 3.0
        while len(tail.seen) < a.visible and time.time() < deadline:
            time.sleep(0.01)
        tail.halt.set()
        tail.join(1)
        vis = [tail.seen[k] - calls[k] for k in calls if k in tail.seen]
        skew = [tail.frame_t[k] - calls[k] for k in calls
                if isinstance(tail.frame_t.get(k), int)]
        out["visible"] = {**pcts(vis), "sent": a.visible, "seen": len(vis),
                          "frame_t_minus_call": pcts(skew)}
    # the same rows with the layout off (its turn is layout_check.py's to
    # judge, as the ledger is ledger_check.py's), torch's calls turn about
    gputop.attach(layout_rate=0)
    time.sleep(0.5)
    turn_about("_layout_off")
    del x
    return out


def worker(a) -> int:
    import torch
    import torch.nn as nn

    if not torch.cuda.is_available() and a.device == "cuda":
        print(json.dumps({"error": "CUDA is not available"}))
        return 2
    res = worker_latency(a, torch) if a.kind == "latency" else worker_train(a, torch, nn)
    print("RESULT " + json.dumps(res), flush=True)
    return 0
