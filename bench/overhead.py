#!/usr/bin/env python3
"""What gputop's agent costs the training process it runs in.

    PYTHONPATH=agent python3 bench/overhead.py --gputop bin/gputop --out overhead.json
    PYTHONPATH=agent python3 bench/overhead.py --gputop bin/gputop --rate 50 --skip snap

Measures, on a CUDA device:
  cpu    a small MLP training loop (the reference trainer's step on the
         reference model, batch 64: Python- and launch-bound, the worst case
         for a sampling thread), without and with gputop.attach() at its
         default rate, in many short rounds: the effect sought (1%) is
         smaller than the spread of a single round;
  toggle the same loop with one agent attached throughout, switched between
         its default rate ("on") and one sample an hour ("idle", its
         thread asleep) every --seg-toggle seconds, in on-idle-idle-on
         rounds: blocks four times shorter than attach/detach allows, so
         drift of the machine's speed cancels better;
  naive  the same loop with a naive thread calling memory_allocated +
         memory_reserved + max_memory_allocated at 100 Hz and 1 kHz;
  floor  (with --rounds-floor) what any sampling thread at the agent's rate
         costs that loop, toggled against the idle agent like "toggle": the
         agent on; the same agent reading through torch's stats call
         instead of in place ("stats", as with GPUTOP_DIRECT=0); a bare
         thread that wakes from poll() and only calls
         torch._C._cuda_memoryStats ("read"); one that only wakes ("wake").
         Results stored before "stats" existed have "half" (the agent at
         half its rate) in its place;
  gpu    a GPU-bound bf16 MLP (8 layers of 8192 x 8192, batch 8192), without
         and with the agent;
  compiled  a GPT-2-small-shaped transformer (12 layers, d 768, 1024 tokens,
         batch 16, tied embeddings, fused AdamW) under torch.compile in
         bf16 autocast, without and with the agent;
  snap   gputop.snapshot(label, ledger=False) call latency (the row's counters;
         its ledger's cost is ledger_check.py's) after a 5 ms pause, against
         torch.cuda.memory_allocated() and the article's three calls timed
         the same way in the same loop, turn about (the check: the snapshot's
         median at most one memory_allocated()'s), then again with the
         layout off (reported); and the time until the snapshot is a
         line in the running `gputop record`'s file (the file is tailed);
  stats  one torch._C._cuda_memoryStats(i) call vs torch.cuda.memory_allocated().

Each workload runs in its own worker process as one long sequence of timed
segments, alternating "none" (nothing attached) with a condition: agent
(gputop.attach() 0.5 s before the segment, gputop.detach() after it),
naive100, naive1000. A condition's slowdown in one round is its step time
over the mean of the "none" segments just before and after it, which
cancels slow drift (clocks, caches); the reported figure is the median over
rounds, with the mean and its standard error beside it. The agent thread's own
CPU time in its segments (from /proc/self/task/TID/schedstat) is reported
too: the GIL time it can take from the training thread is at most that,
plus the hand-offs, and unlike step times it hardly varies between rounds. So
is the training thread's time asleep (wall time less its CPU time and its
wait for a CPU): the agent adds its GIL waits to the CUDA syncs already
there. Step time is the mean over a segment (wall time / steps): a thread that stalls
one step in thirty barely moves a median, but it costs throughput all the
same. gputop's recording shows what the agent sent meanwhile.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import rec as recording  # noqa: E402
from common import start_gputop, stop_proc, write_result  # noqa: E402
from overhead_workers import worker  # noqa: E402  (the measured process's side)

ROUND = {"cpu": ["agent", "none"],
         "toggle": ["on", "idle", "idle", "on"],
         "naive": ["naive100", "none", "naive1000", "none"],
         "gpu": ["agent", "none"],
         "compiled": ["agent", "none"],
         "floor": ["on", "idle", "stats", "idle", "read", "idle", "wake", "idle"]}
# the floor's conditions, as the analysis names them
FLOOR = (("on", "the agent"), ("stats", "the agent, stats call"),
         ("half", "the agent at half the rate"), ("read", "bare: poll + _cuda_memoryStats"),
         ("wake", "bare: poll only"))


# ================================================================ parent side

def run_worker(args: list[str], env: dict, timeout: float, log) -> dict | None:
    cmd = [sys.executable, os.path.abspath(__file__), "_worker"] + args
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        log.write(f"timed out after {timeout} s\n{e.stdout or ''}{e.stderr or ''}\n")
        return None
    log.write(p.stdout + p.stderr)
    log.flush()
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def slowdowns(segs: list[dict], cond: str, key: str = "mean_us", base: str = "none") -> list[float]:
    """Per round: a cond segment against the mean of the base segments around it, in %."""
    return [(v / b - 1) * 100 for v, b in neighbours(segs, cond, key, base)]


def differences(segs: list[dict], cond: str, key: str, base: str) -> list[float]:
    """Per round: a cond segment's key minus the mean of the base segments around it."""
    return [v - b for v, b in neighbours(segs, cond, key, base)]


def neighbours(segs: list[dict], cond: str, key: str, base: str) -> list[tuple[float, float]]:
    """(cond segment's key, mean key of the base segments just before and after it)."""
    out = []
    for i, x in enumerate(segs):
        if x["cond"] != cond or x.get(key) is None:
            continue
        nb = [segs[j][key] for j in (i - 1, i + 1)
              if 0 <= j < len(segs) and segs[j]["cond"] == base and segs[j].get(key) is not None]
        if nb:
            out.append((x[key], sum(nb) / len(nb)))
    return out


def mean_sem(v: list[float]) -> tuple[float | None, float | None]:
    if not v:
        return None, None
    return (round(statistics.fmean(v), 3),
            round(statistics.stdev(v) / len(v) ** 0.5, 3) if len(v) > 1 else None)


def median_or_none(v: list[float]):
    return round(statistics.median(v), 3) if v else None






def parent(a) -> int:
    work = a.workdir or tempfile.mkdtemp(prefix="gputop-overhead-")
    os.makedirs(work, exist_ok=True)
    log = open(os.path.join(work, "overhead.log"), "a")
    env = dict(os.environ)
    agent_dir = os.path.join(REPO, "agent")
    env["PYTHONPATH"] = agent_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    sock = os.path.join(work, "overhead.sock")
    rec = os.path.join(work, "overhead.gputop")
    gp = None
    if a.gputop:
        env["GPUTOP_SOCKET"] = sock
        gp = start_gputop(a.gputop, rec, sock, a.source, log)
        if gp is None:
            print("overhead.py: gputop record did not start; see overhead.log", file=sys.stderr)
    else:
        print("overhead.py: no --gputop: the agent's samples go to whatever gputop runs "
              "(GPUTOP_SOCKET or the per-user socket)", file=sys.stderr)
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "argv": sys.argv}
    t_begin = time.time()
    try:
        for kind, rounds, seg in (("cpu", a.rounds_cpu, a.seg_cpu),
                                  ("toggle", a.rounds_toggle, a.seg_toggle),
                                  ("naive", a.rounds_naive, a.seg_naive),
                                  ("gpu", a.rounds_gpu, a.seg_gpu),
                                  ("compiled", a.rounds_compiled, a.seg_compiled),
                            ("floor", a.rounds_floor, a.seg_toggle)):
            if kind in a.skip or (kind in ("naive", "toggle", "floor") and "cpu" in a.skip) \
                    or rounds <= 0:
                continue
            conds = ["none"] + ROUND[kind] * rounds
            w = run_worker(["--kind", kind, "--conds", ",".join(conds), "--seg", str(seg),
                            "--warm", str(a.warm)] + (["--device", a.device] if kind not in ("gpu", "compiled") else [])
                           + (["--rate", str(a.rate)] if a.rate else []),
                           env, a.worker_timeout, log)
            res[kind] = w
            print(f"  {kind}: " + (", ".join(f"{x['cond']} {x['mean_us']:.1f}us"
                                            for x in w["segments"])
                                   if w else "worker failed (see overhead.log)"), flush=True)
        if "snap" not in a.skip:
            res["latency"] = run_worker(["--kind", "latency", "--snapshots", str(a.snapshots),
                                         "--visible", str(a.visible), "--rec",
                                         rec if gp else ""], env, a.worker_timeout, log)
    finally:
        stop_proc(gp)
    res["seconds"] = round(time.time() - t_begin, 1)

    # agent activity as gputop saw it: proves the agent was sending while timed
    res["agent_seen_by_gputop"] = {}
    if gp is not None and os.path.exists(rec):
        r = recording.load(rec)
        for kind in ("cpu", "gpu", "compiled"):
            w = res.get(kind)
            if not w:
                continue
            smp = r.samples_of(w["pid"])
            res["agent_seen_by_gputop"][kind] = {
                "pid": w["pid"], "samples": len(smp), "hellos": sum(
                    1 for h in r.hellos if h.get("pid") == w["pid"]),
                "dropped": max((x.get("dropped", 0) for x in smp), default=0)}
    out = a.out or os.path.join(work, "overhead.json")
    with open(out, "w") as fh:  # the raw segments first: they outlive a failed analysis
        json.dump(res, fh, indent=1)
    analyse(a, res)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


def analyse(a, res: dict) -> None:
    d = a.results_dir
    p = a.prefix
    summary = {}
    naive = (res.get("naive") or {}).get("segments", [])
    toggle = (res.get("toggle") or {}).get("segments", [])
    for kind in ("cpu", "gpu", "compiled"):
        if kind in a.skip or getattr(a, f"rounds_{kind}", 1) <= 0:
            continue
        w = res.get(kind)
        if not w:
            write_result(d, f"{p}overhead-{kind}", "FAIL", "the worker failed (see overhead.log)")
            continue
        segs = w["segments"]
        agent = slowdowns(segs, "agent")
        limit = 1.0 if kind == "cpu" else 0.5
        s = {"agent_slowdown_pct": median_or_none(agent),
             "agent_slowdown_pct_mean": round(statistics.fmean(agent), 3) if agent else None,
             "agent_slowdown_pct_sem": (round(statistics.stdev(agent) / len(agent) ** 0.5, 3)
                                        if len(agent) > 1 else None),
             "agent_slowdown_pct_rounds": [round(v, 3) for v in agent],
             "agent_slowdown_pct_by_median_step": median_or_none(slowdowns(segs, "agent",
                                                                           "median_us")),
             "step_us": median_or_none([x["mean_us"] for x in segs if x["cond"] == "none"]),
             "agent_thread_cpu_pct": median_or_none([x["agent_thread_cpu_pct"] for x in segs
                                                     if x.get("agent_thread_cpu_pct") is not None]),
             "train_asleep_agent_pct": median_or_none([x["train_asleep_pct"] for x in segs
                                                        if x["cond"] == "agent"
                                                        and x.get("train_asleep_pct") is not None]),
             "train_asleep_none_pct": median_or_none([x["train_asleep_pct"] for x in segs
                                                       if x["cond"] == "none"
                                                       and x.get("train_asleep_pct") is not None]),
             "limit_pct": limit}
        if kind == "cpu":
            tg = slowdowns(toggle, "on", base="idle")
            s.update({
                "toggle_slowdown_pct": median_or_none(tg),
                "toggle_slowdown_pct_mean": round(statistics.fmean(tg), 3) if tg else None,
                "toggle_slowdown_pct_sem": (round(statistics.stdev(tg) / len(tg) ** 0.5, 3)
                                            if len(tg) > 1 else None),
                "toggle_pairs": len(tg),
                "toggle_agent_thread_cpu_pct": median_or_none(
                    [x["agent_thread_cpu_pct"] for x in toggle
                     if x["cond"] == "on" and x.get("agent_thread_cpu_pct") is not None]),
                "toggle_train_asleep_on_pct": median_or_none(
                    [x["train_asleep_pct"] for x in toggle
                     if x["cond"] == "on" and x.get("train_asleep_pct") is not None]),
                "toggle_train_asleep_idle_pct": median_or_none(
                    [x["train_asleep_pct"] for x in toggle
                     if x["cond"] == "idle" and x.get("train_asleep_pct") is not None]),
            })
            s["toggle_train_asleep_added_pts"], s["toggle_train_asleep_added_sem"] = mean_sem(
                differences(toggle, "on", "train_asleep_pct", "idle"))
            s.update({
                "naive100_slowdown_pct": median_or_none(slowdowns(naive, "naive100")),
                "naive1000_slowdown_pct": median_or_none(slowdowns(naive, "naive1000")),
                "naive100_thread_hz": median_or_none(
                    [x["thread_hz"] for x in naive if x["cond"] == "naive100"]),
                "naive1000_thread_hz": median_or_none(
                    [x["thread_hz"] for x in naive if x["cond"] == "naive1000"])})
        summary[kind] = s
        problems = []
        # the toggled blocks resolve the effect best; without them, attach/detach
        verdict = s.get("toggle_slowdown_pct")
        if verdict is None:
            verdict = s["agent_slowdown_pct"]
        if verdict is None:
            problems.append("no agent segment was timed")
        elif verdict > limit:
            problems.append(f"agent slowdown {verdict}% > {limit}%")
        ag = [x for x in segs if x["cond"] == "agent"]
        sent = [x.get("samples_sent") or 0 for x in ag]
        if not all(x.get("connected") for x in ag):
            problems.append("the agent was not connected to gputop in every agent segment")
        seen = res["agent_seen_by_gputop"].get(kind)
        if a.gputop and seen is not None and not seen["samples"]:
            problems.append("gputop received no samples from the agent")
        # samples sent per attach: over the timed segment and the 0.5 s before it
        seg = a.seg_cpu if kind == "cpu" else a.seg_gpu if kind == "gpu" else a.seg_compiled
        rate = statistics.median(sent) / (seg + 0.5) if sent else 0
        spread = (f"mean {s['agent_slowdown_pct_mean']:+.2f}% ± {s['agent_slowdown_pct_sem']:.2f} "
                  f"over {len(agent)} rounds" if s["agent_slowdown_pct_sem"] is not None
                  else f"rounds {', '.join(f'{v:+.2f}' for v in agent)}")
        txt = (f"{TITLES[kind]}: "
               f"step {s['step_us']:.0f} us")
        if s.get("toggle_slowdown_pct") is not None:
            txt += (f"; agent switched on/idle in {s['toggle_pairs']} blocks of {a.seg_toggle:g} s: "
                    f"median {s['toggle_slowdown_pct']:+.2f}% (the verdict; mean "
                    f"{s['toggle_slowdown_pct_mean']:+.2f}% ± {s['toggle_slowdown_pct_sem'] or 0:.2f}; "
                    f"limit {limit}%)")
            if s.get("toggle_train_asleep_added_pts") is not None:
                txt += (f"; training thread asleep (CUDA syncs, GIL) "
                        f"{s['toggle_train_asleep_on_pct']:.2f}% of the time with the agent on, "
                        f"{s['toggle_train_asleep_idle_pct']:.2f}% idle: the agent adds "
                        f"{s['toggle_train_asleep_added_pts']:+.2f} ± "
                        f"{s['toggle_train_asleep_added_sem'] or 0:.2f} points")
            txt += (f"; attach/detach rounds median {s['agent_slowdown_pct'] or 0:+.2f}% "
                    f"({spread}), agent sent ~{rate:.0f} samples/s")
        else:
            txt += (f"; agent median {s['agent_slowdown_pct'] or 0:+.2f}% "
                    f"({spread}; limit {limit}%), agent sent ~{rate:.0f} samples/s")
            if s.get("train_asleep_agent_pct") is not None:
                txt += (f"; training thread asleep {s['train_asleep_agent_pct']:.2f}% of the time "
                        f"with the agent, {s['train_asleep_none_pct'] or 0:.2f}% without")
        if s["agent_thread_cpu_pct"] is not None:
            txt += f"; the agent thread ran {s['agent_thread_cpu_pct']:.2f}% of a core"
        if kind == "cpu":
            txt += (f"; naive thread 100 Hz {s['naive100_slowdown_pct'] or 0:+.1f}%, "
                    f"1 kHz {s['naive1000_slowdown_pct'] or 0:+.1f}% "
                    f"(ran at {s['naive1000_thread_hz'] or 0:.0f}/s)")
        write_result(d, f"{p}overhead-{kind}", "FAIL" if problems else "PASS", txt,
                    problems=problems, **s)

    floor = (res.get("floor") or {}).get("segments", [])
    if floor:
        summary["floor"] = fl = {}
        for cond, _ in FLOOR:
            v = slowdowns(floor, cond, base="idle")
            fl[f"{cond}_pct"] = median_or_none(v)
            fl[f"{cond}_pct_mean"], fl[f"{cond}_pct_sem"] = mean_sem(v)
            fl[f"{cond}_asleep_added_pts"], _ = mean_sem(
                differences(floor, cond, "train_asleep_pct", "idle"))
            fl[f"{cond}_thread_cpu_pct"] = median_or_none(
                [x["agent_thread_cpu_pct"] for x in floor
                 if x["cond"] == cond and x.get("agent_thread_cpu_pct") is not None])
        fl["rounds"] = len(slowdowns(floor, "on", base="idle"))
        fl["read_thread_hz"] = median_or_none([x["thread_hz"] for x in floor if x["cond"] == "read"])
        txt = "; ".join(
            f"{name} {fl[c + '_pct'] or 0:+.2f}% (mean {fl[c + '_pct_mean'] or 0:+.2f} ± "
            f"{fl[c + '_pct_sem'] or 0:.2f}, thread {fl[c + '_thread_cpu_pct'] or 0:.2f}% of a core)"
            for c, name in (("on", "agent"), ("stats", "agent reading through the stats call"),
                            ("half", "agent at half the rate"),
                            ("read", "bare thread with the stats call"),
                            ("wake", "bare thread, wake-ups only")) if fl[c + "_pct"] is not None)
        write_result(d, f"{p}overhead-floor", "INFO",
                     f"small MLP against the idle agent, {fl['rounds']} rounds of "
                     f"{a.seg_toggle:g} s blocks: {txt}", **fl)

    lat = res.get("latency")
    if "snap" in a.skip:
        pass
    elif not lat:
        write_result(d, f"{p}snapshot-latency", "FAIL", "latency worker failed (see overhead.log)")
    else:
        sc = lat["snapshot_call"]
        ref = lat.get("memory_allocated_after_pause") or {}
        three = lat.get("three_naive_calls_after_pause") or {}
        off = lat.get("snapshot_call_layout_off") or {}
        off_ref = lat.get("memory_allocated_after_pause_layout_off") or {}
        ok = sc.get("median_us", 1e9) <= ref.get("median_us", 0)
        write_result(d, f"{p}snapshot-latency", "PASS" if ok else "FAIL",
                    f"gputop.snapshot(label, ledger=False) after a 5 ms pause returns in median "
                    f"{sc.get('median_us')} us (p99 {sc.get('p99_us')} us, max {sc.get('max_us')} us, "
                    f"{sc.get('n')} calls); in the same loop, turn about: one torch.cuda.memory_allocated() "
                    f"{ref.get('median_us')} us (limit: the snapshot's median at most this), the article's "
                    f"three calls {three.get('median_us')} us; 100 us is the goal on a quiet host"
                    + (f"; with the layout off: the row {off.get('median_us')} us, memory_allocated() "
                       f"{off_ref.get('median_us')} us" if off else ""),
                    **sc, reference=ref, three_naive=three, layout_off=off, layout_off_reference=off_ref)
        v = lat.get("visible")
        if v is None:
            write_result(d, f"{p}snapshot-visible", "SKIP", "no gputop record to watch")
        else:
            ok = v["seen"] == v["sent"] and v.get("max_us", 1e12) <= 50_000
            write_result(d, f"{p}snapshot-visible", "PASS" if ok else "FAIL",
                        f"{v['seen']}/{v['sent']} snapshots in gputop record's file after median "
                        f"{v.get('median_us', 0) / 1e3:.1f} ms, max {v.get('max_us', 0) / 1e3:.1f} ms "
                        f"(limit 50 ms; includes the recorder's write)", **v)
        st = lat["stats_calls"]
        one = st.get("_cuda_memoryStats", {}).get("median_us")
        write_result(d, f"{p}stats-call", "INFO",
                    f"torch._C._cuda_memoryStats(i) {one} us, torch.cuda.memory_allocated() "
                    f"{st['memory_allocated'].get('median_us')} us, the naive three calls "
                    f"{st['three_naive_calls'].get('median_us')} us (medians)", **st)
    res["summary"] = summary
    print_table(summary, lat)


def f(v, spec: str) -> str:
    """A number in spec, or a dash as wide as it would have been."""
    if isinstance(v, (int, float)):
        return format(v, spec)
    return format("-", ">" + spec.lstrip("+").split(".")[0] + "s")


WORKLOADS = {"cpu": "small MLP, CPU-bound", "gpu": "bf16 MLP, GPU-bound", "compiled": "compiled GPT-2-small"}
TITLES = {"cpu": "small MLP (CPU-bound)", "gpu": "bf16 8x8192 MLP (GPU-bound)",
          "compiled": "GPT-2-small-shaped transformer, torch.compile, bf16, 16 x 1024 tokens"}


def print_rows(title: str, cols: list[tuple[str, str, str]], summary: dict) -> None:
    """A table of summary's workloads: cols are (header, summary key, format spec)."""
    if not any(k in WORKLOADS for k in summary):
        return
    print("\n" + title)
    width = lambda spec: int(spec.lstrip("+").split(".")[0])  # noqa: E731
    print(f"{'workload':28} " + " ".join(f"{h:>{width(spec)}}" for h, _, spec in cols))
    for kind, s in summary.items():
        if kind not in WORKLOADS:
            continue
        print(f"{WORKLOADS.get(kind, kind):28} " + " ".join(f(s.get(k), spec) for _, k, spec in cols))


def print_table(summary: dict, lat: dict | None) -> None:
    print_rows("agent overhead (mean step time; slowdown vs no agent, median over rounds)",
               [("step us", "step_us", "9.1f"), ("agent %", "agent_slowdown_pct", "+9.2f"),
                ("on/idle %", "toggle_slowdown_pct", "+10.2f"),
                ("naive100 %", "naive100_slowdown_pct", "+11.2f"),
                ("naive1k %", "naive1000_slowdown_pct", "+10.2f")], summary)
    print_rows("training thread asleep (CUDA syncs, GIL waits), % of wall time, median over segments",
               [("agent on", "toggle_train_asleep_on_pct", "9.2f"),
                ("idle", "toggle_train_asleep_idle_pct", "9.2f"),
                ("added", "toggle_train_asleep_added_pts", "+9.2f"),
                ("attached", "train_asleep_agent_pct", "9.2f"),
                ("none", "train_asleep_none_pct", "9.2f")], summary)
    fl = summary.get("floor")
    if fl:
        print(f"\nwhat a thread at the agent's rate costs the small MLP ({fl['rounds']} rounds "
              f"against the idle agent)")
        print(f"{'thread':32} {'median %':>9} {'mean %':>8} {'± sem':>6} {'asleep +pts':>11} "
              f"{'its CPU %':>9}")
        for c, name in FLOOR:
            if fl[c + "_pct"] is None:
                continue
            print(f"{name:32} {f(fl[c + '_pct'], '+9.2f')} {f(fl[c + '_pct_mean'], '+8.2f')} "
                  f"{f(fl[c + '_pct_sem'], '6.2f')} {f(fl[c + '_asleep_added_pts'], '+11.2f')} "
                  f"{f(fl[c + '_thread_cpu_pct'], '9.2f')}")
    if lat:
        print("\ncall latency (us)                  median      p99      max")
        rows = [("gputop.snapshot()", lat["snapshot_call"])]
        rows += [(k, lat[k]) for k in ("memory_allocated_after_pause", "three_naive_calls_after_pause",
                                       "snapshot_call_layout_off", "memory_allocated_after_pause_layout_off")
                 if k in lat]
        rows += [(f"  {k}", v) for k, v in (lat.get("parts_after_pause") or {}).items()]
        rows += [(k, v) for k, v in lat["stats_calls"].items()]
        if lat.get("visible"):
            rows.append((f"visible in recording ({lat['visible']['seen']}/{lat['visible']['sent']})",
                         lat["visible"]))
        for k, v in rows:
            print(f"{k:32} {f(v.get('median_us'), '9.1f')} {f(v.get('p99_us'), '8.1f')} "
                  f"{f(v.get('max_us'), '8.1f')}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_worker"]:
        w = argparse.ArgumentParser(prog="overhead.py _worker")
        w.add_argument("--kind", choices=["cpu", "toggle", "naive", "gpu", "compiled", "floor", "latency"],
                       required=True)
        w.add_argument("--conds", default="none")
        w.add_argument("--seg", type=float, default=1.5)
        w.add_argument("--warm", type=float, default=1.0)
        w.add_argument("--snapshots", type=int, default=300)
        w.add_argument("--visible", type=int, default=40)
        w.add_argument("--rec", default="")
        w.add_argument("--rate", type=float, default=0)
        w.add_argument("--device", default="cuda",
                       help="cpu: run the cpu/toggle/naive loops without a GPU (checks the mechanics only)")
        return worker(w.parse_args(argv[1:]))
    ap = argparse.ArgumentParser(description="gputop agent overhead on a CUDA device",
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gputop", help="gputop binary: a `gputop record` is started for the agent "
                                     "to stream to (and to watch snapshots arrive)")
    ap.add_argument("--source", default="all", choices=["all", "agent"],
                    help="sources of the gputop record started (agent: no GPU driver needed)")
    ap.add_argument("--out", help="JSON with every measurement (default WORKDIR/overhead.json)")
    ap.add_argument("--workdir", help="for the recording, socket and log (default: a temp dir)")
    ap.add_argument("--results-dir", help="write one pass/fail result JSON per check here")
    ap.add_argument("--prefix", default="", help="file name prefix of those results")
    ap.add_argument("--rate", type=float, default=0,
                    help="the agent's rate_hz in the cpu, toggle and gpu runs (default: attach()'s)")
    ap.add_argument("--rounds-cpu", type=int, default=12)
    ap.add_argument("--rounds-toggle", type=int, default=50,
                    help="on-idle-idle-on rounds of the attached agent switched on and off")
    ap.add_argument("--seg-toggle", type=float, default=0.25)
    ap.add_argument("--rounds-naive", type=int, default=2)
    ap.add_argument("--rounds-floor", type=int, default=0,
                    help="on-idle-read-idle-wake-idle rounds: the agent against bare threads")
    ap.add_argument("--rounds-gpu", type=int, default=5)
    ap.add_argument("--rounds-compiled", type=int, default=5)
    ap.add_argument("--seg-cpu", type=float, default=1.0, help="seconds per timed segment")
    ap.add_argument("--seg-naive", type=float, default=1.5)
    ap.add_argument("--seg-gpu", type=float, default=2.0)
    ap.add_argument("--seg-compiled", type=float, default=2.0)
    ap.add_argument("--warm", type=float, default=1.0, help="untimed seconds before the first segment")
    ap.add_argument("--snapshots", type=int, default=300, help="snapshot() calls timed")
    ap.add_argument("--visible", type=int, default=40, help="snapshots watched until they land")
    ap.add_argument("--skip", nargs="*", default=[], choices=["cpu", "gpu", "compiled", "snap"])
    ap.add_argument("--device", default="cuda",
                    help="cpu: run the CPU-bound loops without a GPU, to check this script's "
                         "mechanics (the agent then samples nothing); use with --skip gpu compiled snap")
    ap.add_argument("--worker-timeout", type=float, default=150)
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    a = ap.parse_args(argv)
    if a.dry_run:
        for mod in ("torch", "gputop"):
            try:
                __import__(mod)
                print(f"overhead.py: import {mod}: ok")
            except Exception as e:
                print(f"overhead.py: import {mod}: {type(e).__name__}: {e}")
        if a.gputop and not os.access(a.gputop, os.X_OK):
            print(f"overhead.py: {a.gputop} is not an executable")
        print("overhead.py: dry run ok")
        return 0
    return parent(a)


if __name__ == "__main__":
    sys.exit(main())
