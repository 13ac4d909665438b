#!/usr/bin/env python3
"""gputop's verdict after cleanup on a real GPU: what `gputop export` says
of each end row of real PyTorch runs, recorded by `gputop record --source all`.

    PYTHONPATH=agent python3 bench/verdict_check.py --gputop bin/gputop [--results-dir DIR]

The runs, one process each, all beside one recorder:
  article          the reference article's complete program as written
                   (workloads/article.py: its ModelTrainer and its own cleanup,
                   the tracker swapped for gputop.Tracker): After cleanup must be
                   a pass that names the cuBLAS workspaces it leaves
  article-gputop   the same with gputop.cleanup(): a pass with 0 B allocated
  article-keep     the same, 100 MiB kept in a global: a leak naming `kept`
  scenarios        bench/holders_scenarios.py --verdict: the article's six leak
                   scenarios, baseline before any matmul; Training end must name
                   the culprit, After the fix and After cleanup must pass
  hf, lightning    workloads/frameworks.py: a Trainer run ended by deleting the
                   trainer and the model: a pass
Every row of the article's runs must equal torch's own allocated / reserved /
peak to the byte. Results: 16-verdict (the verdicts), 16-verdict-exact.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import check_args, start_gputop, stop_proc, work_dir, write_result  # noqa: E402

MIB = 1 << 20


def run(cmd: list[str], env: dict[str, str], log, timeout: float) -> int:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        return subprocess.run(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        log.write(f"timed out after {timeout:g} s\n")
        return 124


def verdicts(findings: str) -> dict[int, list[str]]:
    """pid -> its end rows' verdict lines, in order, from export's output."""
    out: dict[int, list[str]] = {}
    for line in findings.splitlines():
        m = re.match(r"GPU \d+ \(.*?\), pid (\d+): (.*)$", line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def main() -> int:
    a = check_args(__doc__, "16-verdict", "the recording, the CSV and each run's output")
    work = work_dir(a, "verdict")
    log = open(os.path.join(work, "verdict.log"), "a")
    rec, sock = os.path.join(work, "verdict.gputop"), os.path.join(work, "v.sock")
    env = dict(os.environ, GPUTOP_SOCKET=sock, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "agent")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    rp = start_gputop(a.gputop, rec, sock, "all", log)
    if rp is None:
        write_result(a.results_dir, a.name, "FAIL", "gputop record did not start (verdict.log)")
        return 1
    py = sys.executable
    outs = {}
    rcs = {}
    try:
        for name, extra in (("article", []), ("article-gputop", ["--cleanup", "gputop"]),
                            ("article-keep", ["--keep", "100"])):
            outs[name] = os.path.join(work, name + ".json")
            rcs[name] = run([py, "bench/workloads/article.py", "--out", outs[name]] + extra, env, log, 120)
        outs["scenarios"] = os.path.join(work, "scenarios.json")
        rcs["scenarios"] = run([py, "bench/holders_scenarios.py", "--verdict", "--modes", "fresh", "--no-cost",
                                "--jobs", "6", "--out", outs["scenarios"]], env, log, 240)
        for fw in ("hf", "lightning"):
            outs[fw] = os.path.join(work, fw + ".json")
            rcs[fw] = run([py, "bench/workloads/frameworks.py", fw, "--out", outs[fw]], env, log, 150)
    finally:
        stop_proc(rp)
    csv_path = os.path.join(work, "verdict.csv")
    ex = subprocess.run([a.gputop, "export", rec, "--csv", csv_path], capture_output=True, text=True, timeout=120)
    log.write(ex.stdout + ex.stderr)
    print(ex.stdout)
    by_pid = verdicts(ex.stdout)
    rows = list(csv.DictReader(open(csv_path, newline=""))) if os.path.exists(csv_path) else []

    def load(name: str) -> dict:
        try:
            with open(outs[name]) as f:
                return json.load(f)
        except Exception:
            return {}

    lines, fails = [], []

    def expect(what: str, got: list[str], want: str) -> None:
        ok = any(x.startswith(want) for x in got)
        lines.append(f"{'ok  ' if ok else 'FAIL'} {what}: {next((x for x in got if x.startswith(want)), got)}")
        if not ok:
            fails.append(what)

    art = load("article")
    v = by_pid.get(art.get("pid", -1), [])
    expect("article, its own cleanup: After cleanup", v,
           "✓ After cleanup: nothing of yours holds CUDA memory (")
    ws = [x for x in v if x.startswith("✓ After cleanup") and "cuBLAS workspaces, not a leak" in x]
    if not ws:
        fails.append("article: the workspaces are not named")
    lines.append(f"     article ends with {art.get('final', {}).get('allocated')} B allocated (torch)")
    v = by_pid.get(load("article-gputop").get("pid", -1), [])
    expect("article, gputop.cleanup(): After cleanup", v,
           "✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated)")
    if load("article-gputop").get("final", {}).get("allocated") != 0:
        fails.append("article with gputop.cleanup() does not end at 0 B allocated")
    v = by_pid.get(load("article-keep").get("pid", -1), [])
    expect("article, 100 MiB kept: After cleanup", v, "✗ After cleanup: 100.0 MiB still held: kept (1 tensor")
    sc = load("scenarios").get("results", [])
    for r in sc:
        v = by_pid.get(r.get("pid", -1), [])
        top = (r.get("held_end", {}).get("top") or [{}])[0].get("name", "?")
        expect(f"scenario {r.get('scenario')}: Training end", v, f"✗ Training end: ")
        if not any(x.startswith("✗ Training end: ") and top in x for x in v) or not r.get("verdict_end_ok"):
            fails.append(f"scenario {r.get('scenario')}: Training end does not name {r.get('culprit_expected')}")
        expect(f"scenario {r.get('scenario')}: After the fix", v, "✓ After the fix: nothing of yours holds CUDA memory")
        expect(f"scenario {r.get('scenario')}: After cleanup", v,
               "✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated)")
        if not r.get("pass"):
            fails.append(f"scenario {r.get('scenario')}: holders_scenarios says FAIL")
    if len(sc) != 6:
        fails.append(f"{len(sc)} scenarios ran, want 6")
    for fw in ("hf", "lightning"):
        v = by_pid.get(load(fw).get("pid", -1), [])
        expect(f"{fw}: After cleanup", v, "✓ After cleanup: nothing of yours holds CUDA memory")
    bad_rc = {k: v for k, v in rcs.items() if v != 0}
    if bad_rc:
        fails.append(f"exit codes {bad_rc}")
    text = "\n".join(lines)
    print(text)
    write_result(a.results_dir, a.name, "FAIL" if fails else "PASS",
                 (f"{len(lines) - 1 - len(fails)} verdicts as wanted; failed: {'; '.join(fails)}" if fails else
                  f"all {sum(1 for x in lines if x.startswith('ok'))} end-row verdicts as wanted (article: workspaces "
                  f"named; gputop.cleanup() to 0 B; kept named; 6 scenarios culprit then pass; HF, Lightning pass)"),
                 lines=lines, rcs=rcs)
    # every row of the article's runs: torch's own values to the byte
    bad = []
    n = 0
    for name in ("article", "article-gputop", "article-keep"):
        d = load(name)
        mine = [r for r in rows if r.get("pid") == str(d.get("pid"))]
        for want in d.get("rows", []):
            got = [r for r in mine if r["label"] == want["label"]]
            n += 1
            if not got or (int(got[0]["allocated_bytes"]), int(got[0]["reserved_bytes"]), int(got[0]["peak_bytes"])) != \
                    (want["allocated"], want["reserved"], want["peak"]):
                bad.append(f"{name} {want['label']}: csv {got[:1]} torch {want}")
    write_result(a.results_dir, a.name + "-exact", "FAIL" if bad or not n else "PASS",
                 f"{n - len(bad)}/{n} rows of the article's three runs equal torch's allocated/reserved/peak "
                 f"to the byte" + (f"; {bad[:3]}" if bad else ""))
    return 1 if fails or bad else 0


if __name__ == "__main__":
    sys.exit(main())
