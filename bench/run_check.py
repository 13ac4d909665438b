#!/usr/bin/env python3
"""`gputop run` on a real GPU: the agent injected with no code change, and
the framework callbacks, each row held to torch's own counters.

    python3 bench/run_check.py --gputop bin/gputop [--results-dir DIR] [--workdir DIR]

Each run is `gputop run --no-tui --record R --csv C -- python ...`, with no
PYTHONPATH to the agent (gputop finds it beside the binary, or through
GPUTOP_AGENT_PATH):
  plain       workloads/plain.py, no gputop in it: Process start at CUDA's
              initialisation is 0 B everywhere; the OOM row equals torch's
              counters after the OOM was caught; Process end equals torch's
              counters at exit (read by the script's last exit handler),
              to the byte; the exit code is the script's
  train_mlp   workloads/train_mlp.py --no-agent (the article's trainer,
              unmodified): Process start 0 B, Process end with a verdict, exit 0
  lightning   workloads/callbacks.py lightning: every row the callback made
  hf          workloads/callbacks.py hf         equals the witness callback's
              torch counters at the same hook, to the byte; Process start
              0 B; Process end and the framework's end row with verdicts
  exit code   a run whose script exits 3 gives 3; one killed by SIGKILL 137
Result: 90-run (and 90-run-exact: how many rows were compared).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import work_dir, write_result  # noqa: E402

FIELDS = (("allocated", "allocated_bytes"), ("reserved", "reserved_bytes"), ("peak", "peak_bytes"))


def gputop_run(a: argparse.Namespace, work: str, name: str, cmd: list[str], log) -> tuple[int, list[dict]]:
    rec, out = os.path.join(work, f"{name}.gputop"), os.path.join(work, f"{name}.csv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUTOP_SOCKET", "GPUTOP")}
    # no GPUTOP_AGENT_PATH unless the caller set one: bin/gputop finds ../agent itself
    env["HF_HUB_OFFLINE"] = env["TRANSFORMERS_OFFLINE"] = "1"
    full = [a.gputop, "run", "--no-tui", "--record", rec, "--force", "--csv", out, "--", *cmd]
    log.write(f"$ {' '.join(full)}\n")
    log.flush()
    p = subprocess.run(full, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=a.timeout)
    log.write(f"exit {p.returncode}\n")
    rows: list[dict] = []
    if os.path.exists(out):
        with open(out, newline="") as f:
            rows = list(csv.DictReader(f))
    return p.returncode, rows


def values(row: dict) -> dict:
    return {k: int(row[c]) if row.get(c) else None for k, c in FIELDS}


def torch_values(d: dict) -> dict:
    return {k: d[k] for k, _ in FIELDS}


class Check:
    def __init__(self) -> None:
        self.fails: list[str] = []
        self.compared = 0

    def want(self, ok: bool, what: str) -> None:
        if not ok:
            self.fails.append(what)

    def same(self, run: str, row: dict | None, torch: dict | None, what: str) -> None:
        if row is None or torch is None:
            self.fails.append(f"{run}: {what}: {'no row' if row is None else 'no torch reading'}")
            return
        self.compared += 1
        if values(row) != torch_values(torch):
            self.fails.append(f"{run}: {what}: gputop {values(row)} != torch {torch_values(torch)}")

    def start_and_end(self, run: str, rows: list[dict]) -> None:
        starts = [r for r in rows if r["label"] == "Process start"]
        self.want(len(starts) == 1, f"{run}: {len(starts)} Process start rows, want 1")
        for r in starts:
            self.compared += 1
            self.want(values(r) == {"allocated": 0, "reserved": 0, "peak": 0},
                      f"{run}: Process start at CUDA's initialisation is {values(r)}, want 0 B")
        ends = [r for r in rows if r["label"] == "Process end"]
        self.want(len(ends) == 1 and ends[0]["verdict"] != "", f"{run}: Process end with a verdict: {ends}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default="90-run")
    ap.add_argument("--workdir", help="for the recordings, CSVs and logs (default: a temp dir)")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--skip", nargs="*", default=[], choices=["plain", "train_mlp", "lightning", "hf", "exit"])
    ap.add_argument("--dry-run", action="store_true", help="check arguments and the workloads' imports, then exit")
    a = ap.parse_args()
    wl = os.path.join(HERE, "workloads")
    if a.dry_run:
        for cmd in (["plain.py", "--dry-run"], ["train_mlp.py", "--dry-run", "--no-agent"]):
            subprocess.run([a.python, os.path.join(wl, cmd[0]), *cmd[1:]], check=True)
        print("run_check.py: dry run ok")
        return 0
    a.gputop = os.path.abspath(a.gputop)
    work = work_dir(a, "run")
    c = Check()
    summary: list[str] = []
    with open(os.path.join(work, "run_check.log"), "w") as log:
        if "plain" not in a.skip:
            out = os.path.join(work, "plain-torch.json")
            rc, rows = gputop_run(a, work, "plain", [a.python, os.path.join(wl, "plain.py"), "--out", out], log)
            c.want(rc == 0, f"plain: exit {rc}")
            t = json.load(open(out)) if os.path.exists(out) else {}
            c.start_and_end("plain", rows)
            c.want(t.get("before_cuda") == {"allocated": 0, "reserved": 0, "peak": 0},
                   f"plain: torch before CUDA {t.get('before_cuda')}")
            ooms = [r for r in rows if r["label"] == "OOM"]
            c.want(len(ooms) == 1, f"plain: {len(ooms)} OOM rows, want 1")
            if ooms:
                c.same("plain", ooms[0], t.get("after_oom"), "OOM row")
                c.want(int(ooms[0]["oom_requested_bytes"] or 0) >= t.get("oom_requested_at_least", 1 << 62),
                       f"plain: OOM asked for {ooms[0]['oom_requested_bytes']}")
            c.same("plain", next((r for r in rows if r["label"] == "Process end"), None), t.get("exit"),
                   "Process end vs torch at exit")
            summary.append(f"plain: {[r['label'] for r in rows]}")
        if "train_mlp" not in a.skip:
            rc, rows = gputop_run(a, work, "train_mlp", [a.python, os.path.join(wl, "train_mlp.py"), "--no-agent",
                                                           "--seconds", "8", "--idle", "0.2"], log)
            c.want(rc == 0, f"train_mlp: exit {rc}")
            c.start_and_end("train_mlp", rows)
            summary.append(f"train_mlp: {len(rows)} rows")
        for fw, end_label in (("lightning", "After teardown"), ("hf", "After training")):
            if fw in a.skip:
                continue
            out = os.path.join(work, f"{fw}-torch.json")
            rc, rows = gputop_run(a, work, fw, [a.python, os.path.join(wl, "callbacks.py"), fw, "--out", out], log)
            c.want(rc == 0, f"{fw}: exit {rc}")
            c.start_and_end(fw, rows)
            seen = json.load(open(out))["rows"] if os.path.exists(out) else []
            c.want(len(seen) > 0, f"{fw}: the witness saw nothing")
            by_label: dict[str, list[dict]] = {}
            for r in rows:
                by_label.setdefault(r["label"], []).append(r)
            used: dict[str, int] = {}
            for w in seen:
                k = used.get(w["label"], 0)
                used[w["label"]] = k + 1
                mine = by_label.get(w["label"], [])
                c.same(fw, mine[k] if k < len(mine) else None, w, f"{w['label']} #{k + 1}")
            ends = by_label.get(end_label, [])
            c.want(len(ends) == 1 and ends[0]["verdict"] != "", f"{fw}: {end_label} with a verdict: {ends}")
            phase = "Validation (start)" if fw == "lightning" else "Evaluation (start)"
            c.want(phase in by_label, f"{fw}: no {phase} row")
            summary.append(f"{fw}: {len(rows)} rows, {end_label} {ends[0]['verdict'] if ends else '-'}")
        if "exit" not in a.skip:
            rc, _ = gputop_run(a, work, "exit3", [a.python, "-c", "import torch; torch.zeros(1, device='cuda'); raise SystemExit(3)"], log)
            c.want(rc == 3, f"exit: a script exiting 3 gave {rc}")
            rc, _ = gputop_run(a, work, "kill", [a.python, "-c", "import os, torch; torch.zeros(1, device='cuda'); os.kill(os.getpid(), 9)"], log)
            c.want(rc == 137, f"exit: a script killed by SIGKILL gave {rc}")
    status = "FAIL" if c.fails else "PASS"
    text = "; ".join(c.fails[:6]) if c.fails else "; ".join(summary)
    write_result(a.results_dir, a.name, status, f"gputop run (logs: {work}): {text}", fails=c.fails, runs=summary)
    write_result(a.results_dir, a.name + "-exact", "FAIL" if any("!=" in f or "want 0 B" in f for f in c.fails) else "PASS",
                 f"{c.compared} rows of gputop run compared with torch's own counters to the byte")
    return 0 if not c.fails else 1


if __name__ == "__main__":
    sys.exit(main())
