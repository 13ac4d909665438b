#!/usr/bin/env python3
"""Allocation history and memory dumps on a real GPU, beside `gputop record`.

    PYTHONPATH=agent python3 bench/history_check.py --gputop bin/gputop [--results-dir DIR]

Five parts, each a child process with the agent attached:

  imports   six programs with history on from attach, the layout read 50
            times a second, then AdamW's first use (which imports
            torch._dynamo in the program's thread): none may break, and
            gputop's thread may import no torch._inductor/_dynamo module
            (torch's memory snapshot with stacks imports torch._inductor);
  overhead  what history=100000 costs: the small CPU-bound loop (the
            reference trainer's step, as overhead.py's "cpu") and a large
            GPU-bound bf16 MLP (as overhead.py's "gpu"), the agent attached
            throughout, history switched on and off between timed segments
            (on-off-off-on rounds, each "on" against the mean of the "off"
            segments beside it); the median slowdown, with mean and spread;
  oom       a training loop fills torch's history (100,000 entries), then
            8 GiB blocks are kept until CUDA runs out: the agent's dump must
            be on disk, named by the recording's oom frame and the CSV's
            OOM row, its top frame the line that allocated the blocks
            (`gputop dump-info`), its request the one that failed, and
            memory_viz's own loader (`python -m torch.cuda._memory_viz`,
            stats and trace_plot) must read it; its size and cost are
            reported;
  labelled  a `losses` list grows by one graph per step; dumps at step 25
            and step 50 (`gputop.snapshot(label, dump=True)`): in both the
            top frame must be the `losses.append(...)` line, its block count
            grown between them (the top grower), labelled with the steps'
            snapshot labels, and memory_viz must read the dump;
  run       issue #29's OOM: a script with no gputop in it keeps 8 GiB
            blocks until CUDA runs out, under `gputop run --no-tui
            --history 100000` (the agent attached at its first CUDA use,
            history asked for from the start): the dump of a short history
            must take at most 1 s and hold the GIL at most 200 ms at 136 GiB
            in use, and the first block must carry the stack that allocated
            it; the dump's phases (the wait, torch's snapshot and the
            thread's CPU time in it, pickle, write, fsync, place) are
            printed to show where the time went.

Results: 95-history-imports, 95-history-overhead-cpu, 95-history-overhead-gpu (INFO),
96-history-oom-dump, 97-history-labelled-dump, 98-history-run-oom-dump.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import pickle
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import start_gputop, stop_proc, work_dir, write_result  # noqa: E402

ENTRIES = 100_000

OVERHEAD = r"""
import json, statistics, sys, time
import torch, torch.nn as nn
sys.path.insert(0, sys.argv[4])
from common import setup_cpu
import gputop
kind, seg, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
gputop.attach()
if kind == "cpu":
    step = setup_cpu(torch, nn)
else:  # the GPU-bound loop of overhead.py: a bf16 MLP, ~30 ms of matrix work a step
    dev = torch.device("cuda")
    mods = []
    for _ in range(8):
        mods += [nn.Linear(8192, 8192, bias=False), nn.GELU()]
    model = nn.Sequential(*mods).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss.item()
def segment(on):
    gputop.attach(history=%d if on else 0)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seg:
        step(); n += 1
    return (time.perf_counter() - t0) / n * 1e6
for _ in range(3): step()
segment(True); segment(False)  # warm both
res = []
for _ in range(rounds):
    a, b, c, d = segment(True), segment(False), segment(False), segment(True)
    res.append({"on": [a, d], "off": [b, c]})
st = gputop.status()
print(json.dumps({"rounds": res, "history": st["history"]}))
""" % ENTRIES

OOM = r"""
import json, sys, time
import torch, torch.nn as nn
sys.path.insert(0, sys.argv[2])
from common import setup_cpu
import gputop
gputop.attach(socket=sys.argv[1], history=%d)
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
step = setup_cpu(torch, nn)
t0 = time.time()  # the agent thread turns history on once it sees CUDA up
while not gputop.status()["history"].get("max_entries") and time.time() - t0 < 10:
    time.sleep(0.01)
for _ in range(3000):  # each step allocates and frees: the history fills
    step()
gputop.snapshot("training done")
hold = []
err = ""
try:
    while True:
        hold.append(torch.empty(8 << 30, dtype=torch.uint8, device="cuda"))  # OOM_LINE
except torch.OutOfMemoryError as e:
    err = str(e).splitlines()[0]
n = len(hold)
del hold
time.sleep(0.5)  # the oom frame reaches gputop
st = gputop.status()
print(json.dumps({"error": err, "held": n, "dumps": st["dumps"], "history": st["history"]}))
""" % ENTRIES

LABELLED = r"""
import json, sys, time
import torch, torch.nn as nn
import gputop
gputop.attach(socket=sys.argv[1], history=%d)
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
dev = torch.device("cuda")
model = nn.Linear(4096, 4096).to(dev)
x = torch.randn(512, 4096, device=dev)  # each step's output: 8 MiB, kept by its graph
t0 = time.time()  # the agent thread turns history on once it sees CUDA up
while not gputop.status()["history"].get("max_entries") and time.time() - t0 < 10:
    time.sleep(0.01)
losses = []
def wait_dump(n):
    t = time.time()
    while len(gputop.status()["dumps"]["written"]) < n and time.time() - t < 60:
        time.sleep(0.05)
for step in range(50):
    gputop.snapshot(f"step {step}")
    losses.append(model(x).pow(2).mean())  # LOSSES_LINE
    if step + 1 == 25:
        gputop.snapshot("step 25 (dump)", dump=True)
        wait_dump(1)
gputop.snapshot("step 50 (dump)", dump=True)
wait_dump(2)
time.sleep(0.5)
st = gputop.status()
print(json.dumps({"dumps": st["dumps"], "history": st["history"], "losses": len(losses)}))
""" % ENTRIES


# issue #29's OOM, with no gputop in the script: gputop run attaches the
# agent at its first CUDA use, history asked for from the start
RUN_OOM = r"""
import json, time
import torch
hold = []
err = ""
try:
    while True:
        hold.append(torch.empty(8 << 30, dtype=torch.uint8, device="cuda"))  # RUN_OOM_LINE
        time.sleep(0.2)  # a step's worth between blocks: the agent samples, gputop forecasts
except torch.OutOfMemoryError as e:
    err = str(e).splitlines()[0]
first = hold[0].untyped_storage().data_ptr() if hold else 0
n = len(hold)
del hold
time.sleep(0.5)
print(json.dumps({"error": err, "held": n, "first": first}))
"""
RUN_GOALS = (1000.0, 200.0)  # a dump of few entries: wall ms, GIL ms (issue #29)


# history on from attach, then an optimizer's first use imports torch._dynamo
# in this thread while the agent's thread reads the layout: torch 2.11's
# snapshot with stacks imported torch._inductor there, and the two imports
# met half way (ImportError in the program, 2 runs of 4 on 2026-12-02)
IMPORTS = r"""
import json, sys, threading, time
agent_imports = []
def hook(ev, args):
    if ev == "import" and args[0].startswith(("torch._inductor", "torch._dynamo")) \
            and threading.current_thread() is not threading.main_thread():
        agent_imports.append(args[0])
sys.addaudithook(hook)
import torch, torch.nn as nn
sys.path.insert(0, sys.argv[2])
from common import setup_cpu
import gputop
gputop.attach(socket=sys.argv[1], history=100000, layout_rate=50)
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
torch.zeros(1, device="cuda")
time.sleep(0.2)  # the agent's thread sees CUDA up, reads layouts
err = ""
try:
    step = setup_cpu(torch, nn)  # AdamW: imports torch._dynamo here
    for _ in range(20):
        step()
except Exception as e:
    err = f"{type(e).__name__}: {e}"
time.sleep(0.5)
lay = gputop.status().get("layout", {})
print(json.dumps({"error": err, "agent_imports": len(agent_imports), "first": agent_imports[:3],
                  "readings": lay.get("readings"), "skipped": lay.get("skipped")}))
"""


def line_of(code: str, marker: str) -> int:
    """The line of the child's code that carries marker (the child runs as
    a file, so its frames name that file and line)."""
    for i, line in enumerate(code.split("\n"), 1):
        if marker in line:
            return i
    raise AssertionError(marker)


def run_child(work: str, name: str, code: str, args: list[str], env: dict, timeout: float, log) -> dict | None:
    path = os.path.join(work, f"{name}.py")
    with open(path, "w") as f:
        f.write(code)
    log.write(f"$ python {path} {' '.join(args)}\n")
    log.flush()
    try:
        p = subprocess.run([sys.executable, path, *args], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        log.write(f"{name}: timed out after {timeout} s\n")
        return None
    log.write(p.stderr[-4000:])
    log.write(p.stdout[-4000:])
    if p.returncode != 0:
        log.write(f"{name}: exited with {p.returncode}\n")
        return None
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        log.write(f"{name}: no JSON on its last line\n")
        return None


def dump_info(gputop: str, path: str) -> tuple[int, str, list[str]]:
    """`gputop dump-info PATH`: exit code, output, and the frame lines of
    the first device's live blocks, largest first."""
    p = subprocess.run([gputop, "dump-info", "--top", "0", path], capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    frames: list[str] = []
    for i, line in enumerate(lines):
        if "bytes  blocks  frame" in line:
            for f in lines[i + 1:]:
                if not f.startswith("    "):
                    break
                frames.append(f)
            break
    return p.returncode, p.stdout + p.stderr, frames


def blocks_of(frame_line: str) -> int:
    """The block count of a dump-info frame line ("  4.0 MiB  25  file:line fn")."""
    m = re.match(r"\s+\S+ \S+\s+(\d+)\s", frame_line)
    return int(m.group(1)) if m else -1


def memory_viz(path: str, work: str, env: dict) -> tuple[bool, str]:
    """torch's own memory_viz loader on a dump: stats and trace_plot."""
    html = os.path.join(work, os.path.basename(path) + ".html")
    outs = []
    for args in (["stats", path], ["trace_plot", path, "-o", html]):
        p = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", *args], env=env,
                           capture_output=True, text=True, timeout=300)
        outs.append(f"$ _memory_viz {args[0]}: rc {p.returncode} {p.stderr.strip()[-300:]}")
        if p.returncode != 0:
            return False, "; ".join(outs)
    ok = os.path.exists(html) and os.path.getsize(html) > 1000
    return ok, "; ".join(outs) + f"; {html}: {os.path.getsize(html) if os.path.exists(html) else 0} bytes"


def oom_frames(rec: str) -> list[dict]:
    out = []
    with open(rec, errors="replace") as f:
        for line in f:
            if '"type":"oom"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def check_overhead(a, work: str, env: dict, log) -> None:
    for kind, seg, rounds in (("cpu", 1.0, 10), ("gpu", 2.0, 4)):
        name = f"95-history-overhead-{kind}"
        r = run_child(work, f"overhead_{kind}", OVERHEAD, [kind, str(seg), str(rounds), HERE], env, 240, log)
        if r is None:
            write_result(a.results_dir, name, "FAIL", f"the {kind} loop did not finish (history_check.log)")
            continue
        if not r["history"].get("max_entries") and r["history"].get("error"):
            write_result(a.results_dir, name, "FAIL", f"history did not turn on: {r['history']['error']}")
            continue
        slow = []
        for rd in r["rounds"]:
            off = statistics.mean(rd["off"])
            slow += [(on / off - 1) * 100 for on in rd["on"]]
        med, mean = statistics.median(slow), statistics.mean(slow)
        sd = statistics.stdev(slow) if len(slow) > 1 else 0.0
        step_off = statistics.median(x for rd in r["rounds"] for x in rd["off"])
        write_result(a.results_dir, name, "INFO",
                     f"{kind}-bound loop ({step_off:.0f} us a step with history off): history={ENTRIES} "
                     f"costs a median {med:+.2f}% (mean {mean:+.2f}% ± {sd:.2f} sd, {len(slow)} segments)",
                     median_pct=med, mean_pct=mean, sd_pct=sd, step_off_us=step_off, rounds=r["rounds"])


def check_oom(a, work: str, env: dict, log) -> None:
    name = "96-history-oom-dump"
    rec, sock = os.path.join(work, "oom.gputop"), os.path.join(work, "oom.sock")
    g = start_gputop(a.gputop, rec, sock, "all", log)
    if g is None:
        write_result(a.results_dir, name, "FAIL", "gputop record did not start (history_check.log)")
        return
    try:
        r = run_child(work, "oom_child", OOM, [sock, HERE], env, 240, log)
    finally:
        stop_proc(g)
    if r is None:
        write_result(a.results_dir, name, "FAIL", "the OOM child did not finish (history_check.log)")
        return
    problems = []
    dumps = r["dumps"]["written"]
    if len(dumps) != 1:
        problems.append(f"{len(dumps)} dumps written ({r['dumps']}; history {r['history']}), want the OOM's one")
        write_result(a.results_dir, name, "FAIL", "; ".join(problems), child=r)
        return
    path = dumps[0]
    want = f"oom_child.py:{line_of(OOM, 'OOM_LINE')} <module>"
    rc, text, frames = dump_info(a.gputop, path)
    log.write(text)
    if rc != 0 or not frames:
        problems.append(f"gputop dump-info exited {rc}: {text[-300:]}")
    elif want not in frames[0]:
        problems.append(f"top frame {frames[0].strip()!r}, want {want}")
    elif blocks_of(frames[0]) != r["held"]:
        problems.append(f"top frame has {blocks_of(frames[0])} blocks, {r['held']} were held")
    if "out of memory: 8.00 GiB asked for at" not in text or want not in text.split("out of memory:")[1].split("\n")[0]:
        problems.append("dump-info does not give the failed 8 GiB request at the OOM's line")
    ok, viz = memory_viz(path, work, env)
    log.write(viz + "\n")
    if not ok:
        problems.append(f"memory_viz could not read it: {viz}")
    ooms = oom_frames(rec)
    d = ooms[-1].get("dump", {}) if ooms else {}
    if d.get("path") != path:
        problems.append(f"the recording's oom frame names {d.get('path')!r}, not {path}")
    csv_path = os.path.join(work, "oom.csv")
    subprocess.run([a.gputop, "export", rec, "--csv", csv_path], capture_output=True, timeout=60)
    try:
        with open(csv_path, newline="") as f:
            rows = [x for x in csv.DictReader(f) if x.get("source") == "oom"]
    except OSError:
        rows = []
    if not rows or rows[-1].get("dump") != path:
        problems.append(f"the CSV's OOM row does not name the dump ({rows[-1].get('dump') if rows else 'no OOM row'!r})")
    cost = (f"{d.get('bytes', 0) / 2**20:.1f} MiB, took {d.get('took_ms', 0):.0f} ms, "
            f"GIL held {d.get('gil_ms', 0):.0f} ms")
    summary = (f"OOM after {r['held']} x 8 GiB: dump of a {ENTRIES}-entry history ({cost}); top frame {want}; "
               f"memory_viz reads it; oom frame and CSV row name it")
    write_result(a.results_dir, name, "FAIL" if problems else "PASS",
                 "; ".join(problems) if problems else summary, problems=problems, dump=d, child=r,
                 frames=frames[:5])


def phases_text(d: dict) -> str:
    """A dump's phases as the log line gives them."""
    ph = d.get("phases") or {}
    if not ph:
        return "no phases (an agent from before them)"
    return (f"wait {ph.get('wait_ms', 0):.1f}, torch {ph.get('take_ms', 0):.1f} (CPU {ph.get('take_cpu_ms', 0):.1f}), "
            f"pickle {ph.get('pickle_ms', 0):.1f}, write {ph.get('write_ms', 0):.1f}, "
            f"fsync {ph.get('fsync_ms', 0):.1f}, place {ph.get('place_ms', 0):.1f} ms"
            + (f"; before torch's snapshot, importing torch._inductor {ph['import_ms']:.1f} ms" if ph.get("import_ms") else ""))


def first_block(path: str, addr: int) -> tuple[int, str]:
    """(the dump's history entries, the top frame of the block at addr, or
    why there is none)."""
    with open(path, "rb") as f:
        state = pickle.load(f)  # the agent's own file, written by this run
    entries = sum(len(t) for t in state.get("device_traces") or [])
    for seg in state.get("segments") or []:
        for b in seg.get("blocks") or []:
            if b.get("address") == addr:
                fr = b.get("frames") or []
                if not fr:
                    return entries, "no stack (allocated before history was on)"
                return entries, f"{os.path.basename(fr[0].get('filename', '?'))}:{fr[0].get('line')} {fr[0].get('name')}"
    return entries, f"no block at {addr:#x} in the dump"


def check_run(a, work: str, env: dict, log) -> None:
    name = "98-history-run-oom-dump"
    path = os.path.join(work, "run_oom_child.py")
    with open(path, "w") as f:
        f.write(RUN_OOM)
    rec, csv_path = os.path.join(work, "run_oom.gputop"), os.path.join(work, "run_oom.csv")
    # as a user runs it: no PYTHONPATH of ours, bin/gputop finds ../agent itself
    run_env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "GPUTOP_SOCKET", "GPUTOP", "GPUTOP_HISTORY")}
    cmd = [a.gputop, "run", "--no-tui", "--history", str(ENTRIES), "--record", rec, "--force", "--csv", csv_path,
           "--", sys.executable, path]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        p = subprocess.run(cmd, cwd=work, env=run_env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        write_result(a.results_dir, name, "FAIL", "gputop run timed out after 240 s (history_check.log)")
        return
    log.write(p.stderr[-6000:] + p.stdout[-2000:])
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        write_result(a.results_dir, name, "FAIL", f"gputop run exited {p.returncode} without the child's JSON "
                                                  "(history_check.log)")
        return
    ooms = oom_frames(rec)
    d = ooms[-1].get("dump", {}) if ooms else {}
    if not d.get("path"):
        write_result(a.results_dir, name, "FAIL", f"no dump at the OOM: {d.get('error') or 'no oom frame'}",
                     child=r, dump=d)
        return
    entries, top = first_block(d["path"], r["first"])
    want = f"run_oom_child.py:{line_of(RUN_OOM, 'RUN_OOM_LINE')} <module>"
    problems = []
    if not r["error"]:
        problems.append("torch raised no OutOfMemoryError")
    took, gil = d.get("took_ms", 0.0), d.get("gil_ms", 0.0)
    if took > RUN_GOALS[0]:
        problems.append(f"the dump took {took:.0f} ms (goal <= {RUN_GOALS[0]:.0f})")
    if gil > RUN_GOALS[1]:
        problems.append(f"the dump held the GIL {gil:.0f} ms (goal <= {RUN_GOALS[1]:.0f})")
    if top != want:
        problems.append(f"the first block's stack: {top} (want {want})")
    summary = (f"OOM after {r['held']} x 8 GiB ({r['held'] * 8} GiB in use) under gputop run --history {ENTRIES}: "
               f"dump of {entries} entries ({d.get('bytes', 0) / 1024:.1f} KiB), took {took:.0f} ms, GIL held "
               f"{gil:.0f} ms (goals {RUN_GOALS[0]:.0f} / {RUN_GOALS[1]:.0f}); phases: {phases_text(d)}; "
               f"first block's stack: {top}")
    print(summary)
    write_result(a.results_dir, name, "FAIL" if problems else "PASS",
                 "; ".join(problems) + " -- " + summary if problems else summary,
                 problems=problems, dump=d, child=r, entries=entries, first_block=top)


def check_labelled(a, work: str, env: dict, log) -> None:
    name = "97-history-labelled-dump"
    rec, sock = os.path.join(work, "labelled.gputop"), os.path.join(work, "labelled.sock")
    g = start_gputop(a.gputop, rec, sock, "all", log)
    if g is None:
        write_result(a.results_dir, name, "FAIL", "gputop record did not start (history_check.log)")
        return
    try:
        r = run_child(work, "labelled_child", LABELLED, [sock], env, 180, log)
    finally:
        stop_proc(g)
    if r is None:
        write_result(a.results_dir, name, "FAIL", "the labelled child did not finish (history_check.log)")
        return
    problems = []
    dumps = r["dumps"]["written"]
    if len(dumps) != 2:
        write_result(a.results_dir, name, "FAIL",
                     f"{len(dumps)} dumps written, want 2: {r['dumps']}; history {r['history']}", child=r)
        return
    want = f"labelled_child.py:{line_of(LABELLED, 'LOSSES_LINE')} <module>"
    counts = []
    for path in dumps:
        rc, text, frames = dump_info(a.gputop, path)
        log.write(text)
        if rc != 0 or not frames:
            problems.append(f"gputop dump-info {path} exited {rc}: {text[-300:]}")
            continue
        if want not in frames[0]:
            problems.append(f"{os.path.basename(path)}: top frame {frames[0].strip()!r}, want {want}")
        elif "[step " not in frames[0]:
            problems.append(f"{os.path.basename(path)}: the top frame has no step labels: {frames[0].strip()!r}")
        counts.append(blocks_of(frames[0]))
    if len(counts) == 2 and not counts[1] > counts[0] > 0:
        problems.append(f"the losses line's blocks did not grow between the dumps: {counts}")
    ok, viz = memory_viz(dumps[-1], work, env)
    log.write(viz + "\n")
    if not ok:
        problems.append(f"memory_viz could not read it: {viz}")
    summary = (f"the losses.append line is the top grower: {counts[0] if counts else '?'} blocks at step 25, "
               f"{counts[1] if len(counts) > 1 else '?'} at step 50, labelled with the steps; memory_viz reads the dump")
    write_result(a.results_dir, name, "FAIL" if problems else "PASS",
                 "; ".join(problems) if problems else summary, problems=problems, child=r)


def check_imports(a, work: str, env: dict, log) -> None:
    name, runs = "95-history-imports", 6
    rec, sock = os.path.join(work, "imports.gputop"), os.path.join(work, "imports.sock")
    g = start_gputop(a.gputop, rec, sock, "agent", log)
    if g is None:
        write_result(a.results_dir, name, "FAIL", "gputop record did not start (history_check.log)")
        return
    got = []
    try:
        for _ in range(runs):
            got.append(run_child(work, "imports_child", IMPORTS, [sock, HERE], env, 120, log))
    finally:
        stop_proc(g)
    broke = [r["error"] for r in got if r is not None and r["error"]]
    lost = sum(r is None for r in got)
    imports = sum(r["agent_imports"] for r in got if r is not None)
    problems = [f"{len(broke)} of {runs} programs broke: {broke[0]}"] if broke else []
    if lost:
        problems.append(f"{lost} of {runs} children did not finish (history_check.log)")
    if imports:
        problems.append(f"gputop's thread imported {imports} torch._inductor/_dynamo modules")
    summary = (f"{runs} programs with history on from attach and AdamW's first use importing torch._dynamo: "
               f"none broke, no torch._inductor/_dynamo import from gputop's thread; layout readings "
               f"{[r['readings'] for r in got if r]}, skipped {[r['skipped'] for r in got if r]}")
    write_result(a.results_dir, name, "FAIL" if problems else "PASS",
                 "; ".join(problems) if problems else summary, children=got)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--results-dir")
    ap.add_argument("--workdir", help="for the children, recordings and dumps (default: a temp dir)")
    ap.add_argument("--only", nargs="*", choices=["imports", "oom", "labelled", "overhead", "run"], help="run only these parts")
    ap.add_argument("--dry-run", action="store_true",
                    help="without a GPU: compile the children and show where their marked lines are")
    a = ap.parse_args()
    a.gputop = os.path.abspath(a.gputop)  # the children run in other directories
    if a.dry_run:
        # without a GPU: the children compile, their markers are where the checks look
        for code, marker in ((OVERHEAD, None), (IMPORTS, None), (OOM, "OOM_LINE"), (LABELLED, "LOSSES_LINE"),
                             (RUN_OOM, "RUN_OOM_LINE")):
            compile(code, "child", "exec")
            if marker:
                print(f"{marker} on line {line_of(code, marker)}")
        return 0
    work = work_dir(a, "history")
    env = dict(os.environ, GPUTOP_DUMP_DIR=os.path.join(work, "dumps"),
               PYTHONPATH=os.pathsep.join(p for p in (os.path.join(os.path.dirname(HERE), "agent"),
                                                      os.environ.get("PYTHONPATH", "")) if p))
    env.pop("GPUTOP_HISTORY", None)
    with open(os.path.join(work, "history_check.log"), "w") as log:
        for part in (check_imports, check_run, check_oom, check_labelled, check_overhead):
            if a.only and part.__name__.removeprefix("check_") not in a.only:
                continue
            try:
                part(a, work, env, log)
            except Exception as e:  # one part's crash must not hide the others
                log.write(f"{part.__name__}: {type(e).__name__}: {e}\n")
                print(f"{part.__name__}: {type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
