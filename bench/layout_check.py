#!/usr/bin/env python3
"""The allocator's layout on a real GPU: what the agent sends equals torch's
own memory snapshot taken at the same moment, and what reading it costs.

    PYTHONPATH=agent python3 bench/layout_check.py [--results-dir DIR] [--workdir DIR]

Each part is a child process (this script with --child PART) with the agent
attached to a socket this script listens on: it reads the frames where the
agent sends them. The child prints torch's own
figures, from torch.cuda.memory_snapshot() taken right after the agent's
reading in the same thread; the script compares them with the frames.

  oom         a fragmentation OOM: a 1 GiB segment split into 128 blocks of
              8 MiB, every other one freed, set_per_process_memory_fraction
              at what is reserved so that no new memory comes from the
              driver, then 16 MiB asked for (more than the largest free
              block, less than the free total): the oom frame's layout
              (read in torch's OOM observer, before the error reaches the
              program) must equal torch's snapshot after the error to the
              byte: largest_free, free_in_segments, every figure, every pool;
  explained   the same OOM beside the real `gputop record` (--gputop): the
              exported CSV's OOM row has torch's free_in_segments and
              largest_free to the byte, and `gputop export` says
              fragmentation;
  graphs      an MLP captured with torch.cuda.graph, then one compiled with
              torch.compile(mode="reduce-overhead"): a row's layout after
              each must hold the graphs' private pools, each pool's figures
              equal to the snapshot's segments of that pool;
  expandable  two children, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
              and unset: the row's layout says expandable or not, as the
              segments do, its settings name the setting, from torch;
  cost        a reading at 100, 10,000 and 100,000 blocks (torch's snapshot
              alone, and the agent's whole reading), the agent's predicted
              cost and whether its periodic reading was made or skipped
              (and why); snapshot() with the layout on and off;
  overhead    a compiled transformer (6 layers, d=1024, bf16) trained with
              the agent attached, the layout read at the default rate (on)
              or not (off) in alternating blocks of steps (ABBA): the
              median step time on against off, within 0.5%.

Results: NAME-oom, NAME-explained, NAME-graphs, NAME-expandable, NAME-overhead (PASS/FAIL),
NAME-cost (INFO). A table of them is printed last; logs in --workdir.
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
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import Listener, parts_parser, run_parts, start_gputop, stop_proc  # noqa: E402

MIB = 1 << 20
PARTS = ("oom", "explained", "graphs", "expandable", "cost", "overhead")
FIGURES = ("segments", "blocks", "reserved", "allocated", "free_in_segments", "largest_free")
OVERHEAD_LIMIT = 0.005  # the layout readings may slow a step by this much at the median


# ---------------------------------------------------------------- torch's own figures


def torch_figures(segments: list[dict], dev: int = 0) -> dict:
    """The layout's figures worked out from torch's snapshot segments of
    device dev, apart from the agent's code: per device, and per pool by
    id ("A,B")."""
    out = dict.fromkeys(FIGURES, 0)
    out["expandable"] = False
    pools: dict[str, dict] = {}
    for seg in segments:
        if seg.get("device", 0) != dev:
            continue
        blocks = seg["blocks"]
        alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        free = max([b["size"] for b in blocks if b["state"] == "inactive"], default=0)
        out["segments"] += 1
        out["blocks"] += len(blocks)
        out["reserved"] += seg["total_size"]
        out["allocated"] += alloc
        out["largest_free"] = max(out["largest_free"], free)
        out["expandable"] = out["expandable"] or bool(seg.get("is_expandable"))
        a, b = seg.get("segment_pool_id", (0, 0))
        p = pools.setdefault(f"{a},{b}", {"segments": 0, "reserved": 0, "allocated": 0, "largest_free": 0})
        p["segments"] += 1
        p["reserved"] += seg["total_size"]
        p["allocated"] += alloc
        p["largest_free"] = max(p["largest_free"], free)
    out["free_in_segments"] = out["reserved"] - out["allocated"]
    out["pools"] = pools
    return out


def compare(what: str, lay: dict | None, want: dict) -> list[str]:
    """Where the agent's layout differs from torch's figures."""
    if not lay:
        return [f"{what}: no layout"]
    bad = [f"{what}: {k} {lay.get(k, 0)} B, torch {want[k]}" for k in FIGURES if lay.get(k, 0) != want[k]]
    got = {p["id"]: {k: p[k] for k in ("segments", "reserved", "allocated", "largest_free")}
           for p in lay.get("pools", [])}
    if lay.get("pools_cut"):
        bad.append(f"{what}: {lay['pools_cut']} pools cut")
    elif got != want["pools"]:
        bad.append(f"{what}: pools {got}, torch {want['pools']}")
    return bad


# ---------------------------------------------------------------- the children


def child(part: str, sock: str) -> dict:
    """One part, in a process of its own; returns what it saw of torch."""
    import torch

    import gputop

    gputop.attach(socket=sock)
    torch.zeros(1, device="cuda")  # CUDA up: the agent finds the device, registers its OOM observer
    t0 = time.time()
    while not (gputop.status().get("connected") and gputop.status().get("devices")) and time.time() - t0 < 10:
        time.sleep(0.05)

    def snap() -> list[dict]:
        try:
            return torch.cuda.memory_snapshot(include_traces=False)
        except TypeError:  # a torch without include_traces
            return torch.cuda.memory_snapshot()

    def row(label: str) -> dict:
        """A row, and torch's figures right after it, in this thread."""
        torch.cuda.synchronize()
        before = time.time_ns()
        gputop.snapshot(label)
        return {"label": label, "before": before, "torch": torch_figures(snap())}

    out: dict = {"pid": os.getpid(), "torch_version": torch.__version__}
    if part == "oom":
        seg = torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda")
        del seg  # one 1 GiB segment, cached
        keep = [torch.empty(8 * MIB, dtype=torch.uint8, device="cuda") for _ in range(128)]
        del keep[1::2]  # 64 holes of 8 MiB, each between two live blocks
        torch.cuda.synchronize()
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(torch.cuda.memory_reserved() / total)
        out["raised"] = False
        try:
            torch.empty(16 * MIB, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            out["raised"] = True
        out["torch"] = torch_figures(snap())
        out["requested"] = 16 * MIB
        del keep
    elif part == "graphs":
        import torch.nn as nn

        def mlp() -> nn.Module:
            return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()

        model, x = mlp(), torch.randn(256, 1024, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            y = model(x)
        g.replay()
        out["graph"] = row("torch.cuda.graph")
        compiled, x2 = torch.compile(mlp(), mode="reduce-overhead"), torch.randn(512, 1024, device="cuda")
        with torch.no_grad():
            for _ in range(5):
                y2 = compiled(x2)
        out["compiled"] = row("reduce-overhead")
        del y, y2
    elif part == "expandable":
        keep = [torch.empty(n * MIB, dtype=torch.uint8, device="cuda") for n in (3, 40, 7, 100, 1, 64)]
        del keep[::2]
        out["row"] = row("expandable")
        out["on"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") == "expandable_segments:True"
    elif part == "cost":
        from gputop import _backend

        ag = gputop.attach()
        backend = _backend.get()
        curve = []
        for n in (100, 10_000, 100_000):
            torch.cuda.empty_cache()
            keep = [torch.empty(256, device="cuda") for _ in range(n)]  # 1 KiB blocks, small pool
            del keep[1::2]  # freed between live ones: the block count stays
            torch.cuda.synchronize()
            walls, cpus, torch_ms = [], [], []
            for _ in range(5):
                t = time.perf_counter()
                snap()
                torch_ms.append((time.perf_counter() - t) * 1e3)
                t, c = time.perf_counter(), time.thread_time()
                lay = backend.layouts([0])[0]
                cpus.append((time.thread_time() - c) * 1e3)
                walls.append((time.perf_counter() - t) * 1e3)
            size = backend.layout_size(0)
            predicted = ag.layouts.predict(size[1]) * 1e3
            seen = ag.status()["layout"]["readings"]
            time.sleep(2.5)  # a periodic reading, or its skip
            curve.append({"n": n, "blocks": lay["blocks"], "segments": lay["segments"], "counted": size[1],
                          "torch_ms": statistics.median(torch_ms), "reading_ms": statistics.median(walls),
                          "reading_cpu_ms": statistics.median(cpus), "predicted_ms": predicted,
                          "periodic_read": ag.status()["layout"]["readings"] > seen,
                          "bound_ms": ag.status()["layout"]["bound_ms"]})
            del keep
        out["curve"] = curve
        torch.cuda.empty_cache()
        keep = [torch.empty(n * 4096, device="cuda") for n in range(1, 301)]  # a few hundred blocks
        lat = {}
        for on in (False, True, False, True):
            gputop.attach(layout_rate=1 if on else 0)
            ns = []
            for i in range(15):
                time.sleep(0.1)
                t = time.perf_counter_ns()
                gputop.snapshot(f"latency {i}", ledger=False)  # the layout's cost alone
                ns.append(time.perf_counter_ns() - t)
            lat.setdefault("on" if on else "off", []).extend(ns)
        out["snapshot_us"] = {k: statistics.median(v) / 1e3 for k, v in lat.items()}
        del keep
    elif part == "overhead":
        import torch.nn as nn

        steps, blocks = int(os.environ.get("LAYOUT_CHECK_STEPS", "30")), 8
        layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, norm_first=True)
        model = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        fast = torch.compile(model)
        x = torch.randn(int(os.environ.get("LAYOUT_CHECK_BATCH", "32")), 1024, 1024, device="cuda")

        def step() -> float:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = fast(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            return loss.item()

        for _ in range(6):  # compile, warm
            step()
        times: dict[str, list[float]] = {"on": [], "off": []}
        readings: dict[str, int] = {"on": 0, "off": 0}
        for k in range(blocks):
            on = k % 4 in (0, 3)  # ABBA ABBA
            key = "on" if on else "off"
            gputop.attach(layout_rate=1 if on else 0)
            seen = gputop.status()["layout"]["readings"]
            for _ in range(steps):
                t = time.perf_counter()
                step()
                times[key].append(time.perf_counter() - t)
            readings[key] += gputop.status()["layout"]["readings"] - seen
        out["times"] = times
        out["readings"] = readings
        out["layout"] = gputop.status()["layout"]
    gputop.detach()
    return out


# ---------------------------------------------------------------- the socket


def run_child(a: argparse.Namespace, part: str, srv: Listener, work: str, env: dict | None = None,
              tag: str = "") -> tuple[dict | None, str]:
    """(what the child saw, or None; its log's path)."""
    log = os.path.join(work, f"{part}{tag}.log")
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(REPO, "agent"), e.get("PYTHONPATH", "")) if p)
    for k in ("GPUTOP_LAYOUT_RATE", "GPUTOP_HISTORY", "GPUTOP_SOCKET"):
        e.pop(k, None)
    with open(log, "w") as fh:
        try:
            p = subprocess.run([a.python, os.path.abspath(__file__), "--child", part, "--socket", srv.path],
                               env=e, stdout=subprocess.PIPE, stderr=fh, text=True, timeout=a.child_timeout)
        except subprocess.TimeoutExpired:
            fh.write(f"timed out after {a.child_timeout} s\n")
            return None, log
        fh.write(p.stdout)
    time.sleep(0.3)  # the agent's last frames reach the socket
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:]), log
    return None, log


# ---------------------------------------------------------------- the checks


def check_oom(a, srv, work) -> tuple[str, str, dict]:
    got, log = run_child(a, "oom", srv, work, env={k: v for k, v in os.environ.items()
                                                   if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")})
    if got is None:
        return "FAIL", f"the child failed ({log})", {}
    ooms = srv.of(got["pid"], "oom")
    problems = [] if got["raised"] else ["torch did not raise OutOfMemoryError"]
    if len(ooms) != 1:
        problems.append(f"{len(ooms)} oom frames, want 1")
    lay = ooms[0].get("layout") if ooms else None
    problems += compare("the oom frame's layout", lay, got["torch"])
    t = got["torch"]
    if not t["largest_free"] < got["requested"] < t["free_in_segments"]:
        problems.append(f"not a fragmentation OOM: largest free {t['largest_free']} B, free {t['free_in_segments']} B, "
                        f"asked {got['requested']} B")
    lay = lay or {}
    txt = (f"16 MiB asked with {t['free_in_segments'] / MIB:.0f} MiB free in segments, the largest free block "
           f"{t['largest_free'] / MIB:.0f} MiB: the oom frame's layout says {lay.get('free_in_segments', 0) / MIB:.0f} "
           f"/ {lay.get('largest_free', 0) / MIB:.0f} MiB, {lay.get('blocks', 0)} blocks in {lay.get('segments', 0)} "
           f"segments, read in {lay.get('took_ms', 0):.2f} ms" + ("; equal to torch's snapshot to the byte" if not problems
                                                                 else "; " + "; ".join(problems)))
    return ("FAIL" if problems else "PASS"), txt, {"problems": problems, "child": got, "layout": lay}


def check_explained(a, srv, work) -> tuple[str, str, dict]:
    """The same fragmentation OOM beside the real `gputop record`: the
    recording's OOM row carries the layout read at the OOM, the CSV's
    columns equal torch's snapshot, and `gputop export` says fragmentation."""
    import csv

    sock, rec = os.path.join(work, "explained.sock"), os.path.join(work, "explained.gputop")
    with open(os.path.join(work, "explained-record.log"), "w") as log:
        p = start_gputop(a.gputop, rec, sock, "all", log)
    if p is None:
        return "FAIL", f"gputop record did not start (see {work}/explained-record.log)", {}
    try:
        got, log = run_child(a, "oom", SimpleNamespace(path=sock), work, tag="-explained",
                             env={k: v for k, v in os.environ.items()
                                  if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")})
    finally:
        stop_proc(p)
    if got is None:
        return "FAIL", f"the child failed ({log})", {}
    out = os.path.join(work, "explained.csv")
    ex = subprocess.run([a.gputop, "export", rec, "--csv", out], capture_output=True, text=True)
    with open(os.path.join(work, "explained-export.txt"), "w") as fh:
        fh.write(ex.stdout + ex.stderr)
    problems = [] if got["raised"] else ["torch did not raise OutOfMemoryError"]
    if "fragmentation" not in ex.stdout:
        problems.append(f"gputop export did not say fragmentation (see {work}/explained-export.txt)")
    rows = []
    if ex.returncode == 0:
        with open(out, newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["label"] == "OOM"]
    t = got["torch"]
    if len(rows) != 1:
        problems.append(f"{len(rows)} OOM rows in the CSV (export rc {ex.returncode})")
    else:
        for col, key in (("free_in_segments_bytes", "free_in_segments"), ("largest_free_bytes", "largest_free")):
            if rows[0].get(col) != str(t[key]):
                problems.append(f"CSV {col} {rows[0].get(col)!r}, torch's snapshot {t[key]}")
    line = next((ln.strip() for ln in ex.stdout.splitlines() if "fragmentation" in ln), "")
    txt = (f"gputop record + export: the OOM row's free_in_segments / largest_free "
           f"{rows[0].get('free_in_segments_bytes') if rows else '?'} / {rows[0].get('largest_free_bytes') if rows else '?'} B "
           f"(torch {t['free_in_segments']} / {t['largest_free']} B); export: {line[:160]}"
           + ("" if not problems else "; " + "; ".join(problems)))
    return ("FAIL" if problems else "PASS"), txt, {"problems": problems, "export": ex.stdout[-4000:]}


def mark_layout(srv: Listener, pid: int, label: str) -> dict | None:
    marks = [m for m in srv.of(pid, "mark") if m.get("label") == label]
    return marks[0]["devs"][0].get("layout") if marks and marks[0].get("devs") else None


def check_graphs(a, srv, work) -> tuple[str, str, dict]:
    got, log = run_child(a, "graphs", srv, work)
    if got is None:
        return "FAIL", f"the child failed ({log})", {}
    problems, parts = [], []
    for key in ("graph", "compiled"):
        r = got[key]
        lay = mark_layout(srv, got["pid"], r["label"])
        problems += compare(r["label"], lay, r["torch"])
        if lay and lay["t"] < r["before"]:
            problems.append(f"{r['label']}: the row took an older reading")
        private = [p for p in (lay or {}).get("pools", []) if p["kind"] != "default"]
        # a graph captured without a pool gets (N,0); reduce-overhead's graphs share a
        # graph_pool_handle(), (0,N), which a MemPool's id cannot be told from
        want = {"graph": ("graph", ",0"), "compiled": ("private", "0,")}[key]
        if not any(p["kind"] == want[0] and (p["id"].endswith(want[1]) if key == "graph" else p["id"].startswith(want[1]))
                   for p in private):
            problems.append(f"{r['label']}: no {want[0]} pool: {private}")
        parts.append(f"{r['label']}: " + ", ".join(f"{p['kind']} pool {p['id']} {p['reserved'] / MIB:.0f} MiB "
                                                    f"reserved, {p['allocated'] / MIB:.1f} MiB allocated"
                                                    for p in private))
    txt = "; ".join(parts) + ("; each pool equal to torch's snapshot" if not problems else "; " + "; ".join(problems))
    return ("FAIL" if problems else "PASS"), txt, {"problems": problems, "child": got}


def check_expandable(a, srv, work) -> tuple[str, str, dict]:
    problems, parts, kids = [], [], {}
    for on in (True, False):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
        if on:
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        tag = "-on" if on else "-off"
        got, log = run_child(a, "expandable", srv, work, env=env, tag=tag)
        if got is None:
            problems.append(f"expandable{tag}: the child failed ({log})")
            continue
        kids[tag] = got
        r = got["row"]
        lay = mark_layout(srv, got["pid"], r["label"]) or {}
        problems += compare(f"expandable{tag}", lay, r["torch"])
        st = lay.get("settings") or {}
        if bool(lay.get("expandable")) != on or r["torch"]["expandable"] != on:
            problems.append(f"expandable{tag}: layout says {bool(lay.get('expandable'))}, torch's segments "
                            f"{r['torch']['expandable']}")
        if st.get("expandable_segments", False) != on or st.get("from") != "torch":
            problems.append(f"expandable{tag}: settings {st}")
        if on and "expandable_segments:True" not in st.get("conf", ""):
            problems.append(f"expandable{tag}: the settings do not name the variable's value: {st}")
        parts.append(f"{'on' if on else 'off'}: expandable={bool(lay.get('expandable'))}, settings from "
                     f"{st.get('from')} {st.get('env', '')}={st.get('conf', '')!r}")
    txt = "; ".join(parts) + ("" if not problems else "; " + "; ".join(problems))
    return ("FAIL" if problems else "PASS"), txt, {"problems": problems, "children": kids}


def check_cost(a, srv, work) -> tuple[str, str, dict]:
    got, log = run_child(a, "cost", srv, work)
    if got is None:
        return "FAIL", f"the child failed ({log})", {}
    skips = [f["skipped"] for f in srv.of(got["pid"], "layout") if f.get("skipped")]
    print("\nblocks    segments  torch snapshot  agent reading (cpu)  predicted  periodic reading   (bound)")
    for c in got["curve"]:
        print(f"{c['blocks']:>8,}  {c['segments']:>8}  {c['torch_ms']:>11.2f} ms  {c['reading_ms']:>8.2f} ms "
              f"({c['reading_cpu_ms']:.2f})  {c['predicted_ms']:>7.2f} ms  {'made' if c['periodic_read'] else 'skipped':>16}"
              f"   ({c['bound_ms']:g} ms)")
    if skips:
        print(f"a skip said: {skips[-1]}")
    lat = got["snapshot_us"]
    print(f"snapshot() median: {lat['off']:.0f} us with the layout off, {lat['on']:.0f} us on\n")
    txt = ("a reading at " + ", ".join(f"{c['blocks']:,} blocks {c['reading_ms']:.2f} ms (torch's snapshot "
                                       f"{c['torch_ms']:.2f}; {'made' if c['periodic_read'] else 'skipped'})"
                                       for c in got["curve"])
           + f"; snapshot() median {lat['off']:.0f} us off, {lat['on']:.0f} us on"
           + (f"; a skip said: {skips[-1]}" if skips else ""))
    return "INFO", txt, {"child": got, "skips": skips[-5:]}


def check_overhead(a, srv, work) -> tuple[str, str, dict]:
    got, log = run_child(a, "overhead", srv, work)
    if got is None:
        return "FAIL", f"the child failed ({log})", {}
    on, off = statistics.median(got["times"]["on"]), statistics.median(got["times"]["off"])
    over = on / off - 1
    problems = []
    if abs(over) > OVERHEAD_LIMIT:
        problems.append(f"median step {over * 100:+.2f}% with the layout read, limit ±{OVERHEAD_LIMIT * 100:g}%")
    # a reading under way as a block turns the layout off may land in it: one per block at most
    if got["readings"]["on"] < 1 or got["readings"]["off"] > 4:
        problems.append(f"readings on/off: {got['readings']}")
    lay = got["layout"]
    txt = (f"compiled transformer, median step {off * 1e3:.1f} ms off, {on * 1e3:.1f} ms on ({over * 100:+.2f}%; "
           f"mean {(statistics.fmean(got['times']['on']) / statistics.fmean(got['times']['off']) - 1) * 100:+.2f}%), "
           f"{got['readings']['on']} readings in the 'on' blocks, {lay.get('took_ms')} ms the last, step seen "
           f"{lay.get('step_ms', '?')} ms, bound {lay.get('bound_ms')} ms")
    if problems:
        txt += "; " + "; ".join(problems)
    return ("FAIL" if problems else "PASS"), txt, {"problems": problems, "child": got}


CHECKS = {"oom": check_oom, "explained": check_explained, "graphs": check_graphs, "expandable": check_expandable, "cost": check_cost,
          "overhead": check_overhead}


def dry_run() -> int:
    """Without a GPU: the socket, the frames' bookkeeping and the figures."""
    d = tempfile.mkdtemp(prefix="gputop-layout-")
    srv = Listener(os.path.join(d, "s.sock"))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(srv.path)
    seg = {"device": 0, "total_size": 12 * MIB, "segment_pool_id": (1, 0), "blocks": [
        {"size": 4 * MIB, "state": "active_allocated"}, {"size": 2 * MIB, "state": "inactive"},
        {"size": 2 * MIB, "state": "active_allocated"}, {"size": 4 * MIB, "state": "inactive"}]}
    want = torch_figures([seg])
    lay = {**{k: want[k] for k in FIGURES}, "pools": [{"kind": "graph", "id": "1,0", **want["pools"]["1,0"]}]}
    c.sendall(json.dumps({"type": "hello", "pid": 7}).encode() + b"\n"
              + json.dumps({"type": "oom", "t": 1, "layout": lay}).encode() + b"\n")
    c.close()
    t0 = time.time()
    while not srv.of(7, "oom") and time.time() - t0 < 5:
        time.sleep(0.01)
    ok = srv.of(7, "oom") and not compare("dry", srv.of(7, "oom")[0]["layout"], want)
    ok = ok and compare("dry", dict(lay, largest_free=1), want) != []
    srv.close()
    print(f"layout_check.py: parts {', '.join(PARTS)}; figures of a 12 MiB segment: free "
          f"{want['free_in_segments'] // MIB} MiB, largest {want['largest_free'] // MIB} MiB; "
          f"socket and comparison {'ok' if ok else 'BROKEN'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = parts_parser(__doc__, "35-layout", list(PARTS), list(PARTS), 150, "the socket, the bookkeeping, the figures")
    ap.add_argument("--gputop", default="bin/gputop", help="the binary the explained part records with")
    a = ap.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.socket)), flush=True)
        return 0
    if a.dry_run:
        return dry_run()
    return run_parts(a, {p: one_result(p, CHECKS[p]) for p in PARTS}, "layout")


def one_result(part: str, check):
    """A part that gives one result, as run_parts takes it."""
    return lambda a, srv, work: [(part, *check(a, srv, work))]


if __name__ == "__main__":
    sys.exit(main())
