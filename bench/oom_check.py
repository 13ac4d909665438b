#!/usr/bin/env python3
"""A real CUDA out-of-memory error beside `gputop record`: the agent's OOM
event must reach the recording with torch's allocator state at that moment.

    PYTHONPATH=agent python3 bench/oom_check.py --gputop bin/gputop [--results-dir DIR]

A child process attaches the agent, allocates 1 GiB, then asks for more
memory than the GPU has; torch raises OutOfMemoryError and calls its
out-of-memory observers (the agent's among them) first. The check: one
`oom` frame from the child, its requested size the one asked for, its
allocated / reserved equal to what torch reports right after the error,
an "OOM" row in `gputop export`'s CSV, and export's explanation of it:
the size asked for is more than the whole GPU.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rec as recording  # noqa: E402
from common import start_gputop, stop_proc, write_result  # noqa: E402

CHILD = r"""
import json, sys, time
import torch, gputop
ag = gputop.attach(socket=sys.argv[1])
keep = torch.ones(1 << 28, device="cuda")  # 1 GiB of float32
want = torch.cuda.get_device_properties(0).total_memory * 2
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
try:
    torch.empty(want, dtype=torch.uint8, device="cuda")
    raised = False
except torch.OutOfMemoryError:
    raised = True
after = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
time.sleep(0.3)  # the OOM frame goes out at once; leave time for it to land
status = gputop.status()
gputop.detach()
print(json.dumps({"pid": __import__("os").getpid(), "raised": raised, "want": want,
                  "after": after, "status": status}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default="32-oom")
    ap.add_argument("--workdir", help="for the recording, its CSV and logs (default: a temp dir)")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="gputop-oom.")
    os.makedirs(work, exist_ok=True)
    sock, rec = os.path.join(work, "gputop.sock"), os.path.join(work, "oom.gputop")
    with open(os.path.join(work, "record.log"), "w") as log:
        p = start_gputop(a.gputop, rec, sock, "agent", log)
    if p is None:
        write_result(a.results_dir, a.name, "FAIL", f"gputop record did not start (see {work}/record.log)")
        return 1
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, sock], capture_output=True, text=True,
                               timeout=60)
    finally:
        stop_proc(p)
    problems = []
    try:
        got = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        write_result(a.results_dir, a.name, "FAIL",
                     f"the child failed (rc {child.returncode}): {child.stderr.strip()[-300:]}")
        return 1
    ooms = [f for f in recording.load(rec).ooms if f.get("pid") == got["pid"]]
    if not got["raised"]:
        problems.append("torch did not raise OutOfMemoryError")
    if len(ooms) != 1:
        problems.append(f"{len(ooms)} oom frames from pid {got['pid']} in the recording, want 1")
    o = ooms[0] if ooms else {}
    if ooms and o.get("requested", 0) < got["want"]:
        problems.append(f"requested {o.get('requested')} B, the child asked for {got['want']} B")
    if ooms and (o.get("allocated"), o.get("reserved")) != (got["after"]["allocated"], got["after"]["reserved"]):
        problems.append(f"oom frame allocated/reserved {o.get('allocated')}/{o.get('reserved')} B, "
                        f"torch after the error {got['after']['allocated']}/{got['after']['reserved']} B")
    out = os.path.join(work, "oom.csv")
    ex = subprocess.run([a.gputop, "export", rec, "--csv", out], capture_output=True, text=True)
    with open(os.path.join(work, "oom-export.txt"), "w") as fh:
        fh.write(ex.stdout + ex.stderr)
    if "more than the whole GPU" not in ex.stdout:
        problems.append("gputop export did not explain the OOM as a request larger than the GPU "
                        f"(see {work}/oom-export.txt)")
    rows = []
    if ex.returncode == 0:
        with open(out, newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["label"] == "OOM"]
    if len(rows) != 1:
        problems.append(f"{len(rows)} OOM rows in the exported CSV (export rc {ex.returncode})")
    elif ooms and rows[0].get("oom_requested_bytes") != str(o.get("requested")):
        problems.append(f"CSV oom_requested_bytes {rows[0].get('oom_requested_bytes')!r}, "
                        f"frame {o.get('requested')}")
    gib = 1 << 30
    txt = (f"torch raised OutOfMemoryError for {got['want'] / gib:.1f} GiB; oom frame: requested "
           f"{o.get('requested', 0) / gib:.1f} GiB, free {o.get('free', 0) / gib:.2f} GiB, allocated "
           f"{o.get('allocated')} B, reserved {o.get('reserved')} B (torch after the error: "
           f"{got['after']['allocated']} / {got['after']['reserved']} B); OOM rows in the CSV: {len(rows)}; "
           f"explained by export: {'yes' if 'more than the whole GPU' in ex.stdout else 'no'}")
    write_result(a.results_dir, a.name, "FAIL" if problems else "PASS", txt, problems=problems,
                 frame=o, child=got)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
