#!/usr/bin/env python3
"""Real CUDA out-of-memory errors beside `gputop record`: the agent's OOM
event must reach the recording with torch's allocator state at that moment,
and gputop must explain it.

    PYTHONPATH=agent python3 bench/oom_check.py --gputop bin/gputop [--results-dir DIR]

Three scenarios, each a child process with the agent attached, beside its
own `gputop record --source all`:

  huge  1 GiB held, then twice the GPU's memory asked for at once: the
        explanation must be that the request alone exceeds the GPU;
  fill  1 GiB tensors kept until the GPU is full, the usual OOM: the
        explanation must be live tensors (torch frees its cache before
        giving up, so no cached memory is left to blame);
  limit torch.cuda.set_per_process_memory_fraction(0.05), then 8 GiB asked
        for: an OOM with most of the GPU free, whose explanation must name
        the fraction (the frame's limit below the GPU's total).

torch raises OutOfMemoryError and calls its out-of-memory observers (the
agent's among them) first. For each: one `oom` frame from the child, its
requested size the one asked for, its allocated / reserved equal to what
torch reports right after the error, an "OOM" row in `gputop export`'s CSV,
and export's explanation.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rec as recording  # noqa: E402
from common import check_args, start_gputop, stop_proc, work_dir, write_result  # noqa: E402

CHILD = r"""
import json, os, sys, time
import torch, gputop
mode = sys.argv[2]
ag = gputop.attach(socket=sys.argv[1])
if mode == "limit":
    torch.cuda.set_per_process_memory_fraction(0.05, 0)
keep = [torch.ones(1 << 28, device="cuda")]  # 1 GiB of float32
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
time.sleep(0.2)  # NVML sees the process before the error
total = torch.cuda.get_device_properties(0).total_memory
want = {"huge": total * 2, "fill": 1 << 30, "limit": 8 << 30}[mode]
raised = False
try:
    if mode != "fill":
        torch.empty(want, dtype=torch.uint8, device="cuda")
    else:
        while len(keep) < 100000:
            keep.append(torch.empty(want, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    raised = True
after = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
time.sleep(0.3)  # the OOM frame goes out at once; leave time for it to land
status = gputop.status()
del keep
gputop.detach()
print(json.dumps({"pid": os.getpid(), "raised": raised, "want": want, "total": total,
                  "after": after, "status": status}))
"""

# what `gputop export` must say of each scenario's OOM (summary/oom.go)
CAUSE = {"huge": "more than the whole GPU", "fill": "Live tensors fill the GPU",
         "limit": "set_per_process_memory_fraction"}
GIB = 1 << 30


def scenario(a, mode: str, work: str) -> tuple[list[str], str, dict]:
    """Runs one scenario; returns (problems, summary, details)."""
    name = "oom" if mode == "huge" else f"oom-{mode}"
    sock, rec = os.path.join(work, f"{name}.sock"), os.path.join(work, f"{name}.gputop")
    with open(os.path.join(work, f"{name}-record.log"), "w") as log:
        p = start_gputop(a.gputop, rec, sock, "all", log)
    if p is None:
        return [f"gputop record did not start (see {work}/{name}-record.log)"], f"{mode}: no recorder", {}
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, sock, mode], capture_output=True,
                               text=True, timeout=120)
    finally:
        stop_proc(p)
    try:
        got = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return ([f"{mode}: the child failed (rc {child.returncode}): {child.stderr.strip()[-300:]}"],
                f"{mode}: child failed", {})
    problems = []
    ooms = [f for f in recording.load(rec).ooms if f.get("pid") == got["pid"]]
    if not got["raised"]:
        problems.append(f"{mode}: torch did not raise OutOfMemoryError")
    if len(ooms) != 1:
        problems.append(f"{mode}: {len(ooms)} oom frames from pid {got['pid']} in the recording, want 1")
    o = ooms[0] if ooms else {}
    if ooms and o.get("requested", 0) < got["want"]:
        problems.append(f"{mode}: requested {o.get('requested')} B, the child asked for {got['want']} B")
    if ooms and (o.get("allocated"), o.get("reserved")) != (got["after"]["allocated"], got["after"]["reserved"]):
        problems.append(f"{mode}: oom frame allocated/reserved {o.get('allocated')}/{o.get('reserved')} B, "
                        f"torch after the error {got['after']['allocated']}/{got['after']['reserved']} B")
    if ooms and mode == "limit" and not 0 < o.get("limit", 0) < got["total"]:
        problems.append(f"{mode}: oom frame limit {o.get('limit')} B, want below the GPU's {got['total']} B")
    out = os.path.join(work, f"{name}.csv")
    ex = subprocess.run([a.gputop, "export", rec, "--csv", out], capture_output=True, text=True)
    with open(os.path.join(work, f"{name}-export.txt"), "w") as fh:
        fh.write(ex.stdout + ex.stderr)
    explained = CAUSE[mode] in ex.stdout
    if not explained:
        problems.append(f"{mode}: gputop export did not give the cause {CAUSE[mode]!r} "
                        f"(see {work}/{name}-export.txt)")
    rows = []
    if ex.returncode == 0:
        with open(out, newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["label"] == "OOM"]
    if len(rows) != 1:
        problems.append(f"{mode}: {len(rows)} OOM rows in the exported CSV (export rc {ex.returncode})")
    elif ooms and rows[0].get("oom_requested_bytes") != str(o.get("requested")):
        problems.append(f"{mode}: CSV oom_requested_bytes {rows[0].get('oom_requested_bytes')!r}, "
                        f"frame {o.get('requested')}")
    txt = (f"{mode}: torch raised OutOfMemoryError for {got['want'] / GIB:.1f} GiB; oom frame: requested "
           f"{o.get('requested', 0) / GIB:.1f} GiB, free {o.get('free', 0) / GIB:.2f} GiB, limit "
           f"{o.get('limit', 0) / GIB:.2f} GiB, allocated "
           f"{o.get('allocated')} B, reserved {o.get('reserved')} B (torch after the error: "
           f"{got['after']['allocated']} / {got['after']['reserved']} B); OOM rows in the CSV: {len(rows)}; "
           f"export's cause: {'yes' if explained else 'no'}")
    return problems, txt, {"frame": o, "child": got}


def main() -> int:
    a = check_args(__doc__, "32-oom", "the recordings, their CSVs and logs")
    work = work_dir(a, "oom")
    problems, texts, details = [], [], {}
    for mode in ("huge", "fill", "limit"):
        p, txt, d = scenario(a, mode, work)
        problems += p
        texts.append(txt)
        details[mode] = d
    write_result(a.results_dir, a.name, "FAIL" if problems else "PASS", "; ".join(texts),
                 problems=problems, **details)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
