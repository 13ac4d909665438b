#!/usr/bin/env python3
"""`gputop fit` on real training: does the predicted largest batch fit,
and does 10% above it not?

    python3 bench/fit_check.py --gputop bin/gputop [--results-dir DIR] [--workdir DIR]

For each workload, `gputop fit --memory 16GiB --values ... --json J --
python workloads/W.py --batch-size {}` finds the largest batch predicted
to fit under a 16 GiB cap; then the workload runs directly (no gputop),
capped the same way (set_per_process_memory_fraction), at the predicted
batch and at 10% above it, for --steps steps each:
  gpt     workloads/fit_gpt.py (GPT-2 small's shape, 1024 tokens, AdamW,
          bf16), values 1,2,4,8
  resnet  workloads/fit_resnet.py (torchvision ResNet-50, 224x224, bf16),
          values 16,32,64,128; skipped, and said, without torchvision
PASS when the predicted batch fits and 10% above it runs out of memory, or
fits with a peak the model's stated error (and the margin) allowed. Also:
how long gputop fit took, against a bisection search for the largest
batch from 1 to the first value that ran out of memory, estimated from
the direct runs' times (one run per probe). A short table is printed last.
Results: 38-fit-gpt, 38-fit-resnet (and 38-fit-time: the times, INFO).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import work_dir, write_result  # noqa: E402

GiB = 1 << 30
WORKLOADS = {
    "gpt": ("fit_gpt.py", "1,2,4,8"),
    "resnet": ("fit_resnet.py", "16,32,64,128"),
}


def direct(a: argparse.Namespace, script: str, batch: int, log) -> dict:
    """The workload run directly, capped as gputop fit caps it: its RESULT
    line, with the seconds the whole process took."""
    cmd = [a.python, script, "--batch-size", str(batch), "--steps", str(a.steps), "--cap", str(a.memory)]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    took = time.monotonic() - t0
    log.write(p.stdout + p.stderr + f"exit {p.returncode} in {took:.1f} s\n")
    got = {"fit": None, "exit": p.returncode, "process_seconds": round(took, 1), "batch_size": batch}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            got.update(json.loads(line[7:]))
    return got


def check(a: argparse.Namespace, name: str, work: str, log) -> dict:
    script, values = WORKLOADS[name]
    script = os.path.join(HERE, "workloads", script)
    out = os.path.join(work, f"fit-{name}.json")
    cmd = [a.gputop, "fit", "--values", values, "--memory", str(a.memory), "--json", out,
           "--max-seconds", str(a.max_seconds), "--", a.python, script, "--batch-size", "{}"]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout * 8)
    fit_s = time.monotonic() - t0
    log.write(p.stdout + p.stderr + f"exit {p.returncode} in {fit_s:.1f} s\n")
    res: dict = {"workload": name, "fit_seconds": round(fit_s, 1), "fit_exit": p.returncode, "values": values}
    rep = json.load(open(out)) if os.path.exists(out) else {}
    pred, model = rep.get("prediction"), rep.get("model")
    res["table"] = p.stdout
    if not pred or not model:
        res.update(status="FAIL", summary=f"gputop fit made no prediction (exit {p.returncode}): {rep.get('no_prediction', p.stderr[-300:])}")
        return res
    v = pred["value"]
    above = max(v + 1, math.ceil(v * 1.1))
    at, up = direct(a, script, v, log), direct(a, script, above, log)
    at_model = lambda x: model["flat_bytes"] + model["per_value_bytes"] * x  # noqa: E731
    res.update(predicted=v, above=above, limited_by=pred["limited_by"], model=model, at=at, up=up,
               predicted_peak=round(at_model(v)), error_on_direct=(abs(at["peak"] - at_model(v)) / at["peak"]) if at.get("peak") else None)
    fails = []
    if at.get("fit") is not True:
        fails.append(f"the predicted {v} did not fit when run (exit {at['exit']})")
    if up.get("fit") is True:
        # it fit: only right when the model's stated error (and the margin) allowed it
        allowed = at_model(above) - model["max_error_bytes"] <= a.memory
        if not allowed:
            fails.append(f"{above} (10% above) fit with a peak of {up['peak'] / GiB:.2f} GiB, which the model "
                         f"({at_model(above) / GiB:.2f} GiB, error {model['max_error_bytes'] / GiB:.3f} GiB) put over the limit")
        res["above_fit_within_error"] = allowed
    elif up.get("fit") is None:
        fails.append(f"{above}: the direct run said nothing (exit {up['exit']})")
    # bisection from 1 to the first value that ran out of memory (or twice
    # the largest value), one direct run a probe, each taking what the
    # direct runs took on average
    ooms = [r["value"] for r in rep["runs"] if r["status"] == "oom"]
    hi = min(ooms) if ooms else 2 * max(r["value"] for r in rep["runs"])
    probes = max(1, math.ceil(math.log2(max(hi - 1, 2))))
    per_run = (at["process_seconds"] + up["process_seconds"]) / 2
    res.update(bisection_probes=probes, bisection_seconds_estimated=round(probes * per_run, 1))
    res["status"] = "FAIL" if fails else "PASS"
    res["summary"] = ("; ".join(fails) if fails else
                      f"predicted {v} fit when run (peak {at['peak'] / GiB:.2f} GiB, predicted {at_model(v) / GiB:.2f}), "
                      f"{above} {'ran out of memory' if up.get('fit') is False else 'fit within the stated error'}; "
                      f"limited by {pred['limited_by']}; gputop fit {fit_s:.0f} s vs bisection ~{probes * per_run:.0f} s "
                      f"({probes} runs of {per_run:.0f} s)")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--results-dir")
    ap.add_argument("--workdir", help="for gputop fit's JSON and the log (default: a temp dir)")
    ap.add_argument("--memory", type=int, default=16 * GiB, help="the cap, in bytes (default 16 GiB)")
    ap.add_argument("--steps", type=int, default=6, help="steps of each direct run")
    ap.add_argument("--max-seconds", type=float, default=60, help="gputop fit's --max-seconds")
    ap.add_argument("--timeout", type=float, default=120, help="seconds for one direct run")
    ap.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    ap.add_argument("--dry-run", action="store_true", help="check arguments and the workloads on the CPU, then exit")
    a = ap.parse_args()
    if a.dry_run:
        for name in a.only:
            subprocess.run([a.python, os.path.join(HERE, "workloads", WORKLOADS[name][0]), "--batch-size", "2",
                            "--dry-run"], check=True)
        print("fit_check.py: dry run ok")
        return 0
    a.gputop = os.path.abspath(a.gputop)
    work = work_dir(a, "fit")
    results = []
    with open(os.path.join(work, "fit_check.log"), "w") as log:
        for name in a.only:
            if name == "resnet" and subprocess.run([a.python, "-c", "import torchvision"], capture_output=True).returncode:
                write_result(a.results_dir, f"38-fit-{name}", "SKIP", "torchvision is not installed on this machine")
                continue
            r = check(a, name, work, log)
            results.append(r)
            print(r.pop("table"))
            write_result(a.results_dir, f"38-fit-{name}", r["status"], r["summary"], **{k: v for k, v in r.items() if k not in ("status", "summary")})
    rows = [("workload", "values", "predicted", "run", "+10%", "run", "fit s", "bisection s (est.)")]
    for r in results:
        at, up = r.get("at", {}), r.get("up", {})
        word = lambda x: {True: "fit", False: "OOM", None: "-"}[x.get("fit")]  # noqa: E731
        rows.append((r["workload"], r["values"], str(r.get("predicted", "-")), word(at), str(r.get("above", "-")), word(up),
                     str(r["fit_seconds"]), str(r.get("bisection_seconds_estimated", "-"))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
    write_result(a.results_dir, "38-fit-time", "INFO", "; ".join(
        f"{r['workload']}: gputop fit {r['fit_seconds']} s, bisection ~{r.get('bisection_seconds_estimated', '-')} s" for r in results) or "nothing ran",
        table=text)
    print(f"\nlogs: {work}\n{text}")
    return 0 if all(r["status"] == "PASS" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
