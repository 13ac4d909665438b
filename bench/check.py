#!/usr/bin/env python3
"""Checks for the GPU-machine run (scripts/gpu-check.sh): each subcommand reads
what a step produced, prints what it found and writes a result JSON
({"status": PASS|FAIL|SKIP, "summary": one line, ...}).

    check.py train   --torch T.json --csv S.csv --rec R.gputop --out res.json
    check.py spikes  --spikes S.json --rec R.gputop --out res.json
    check.py sigkill --rec R.gputop --pid PID --kill-ns NS --out res.json
    check.py rate    --rec R.gputop --min-hz 990 --out res.json
    check.py result  --out res.json --status SKIP --summary "why"
    check.py table   DIR            (the final pass/fail table of DIR/*.json)

Standard library only.
"""
from __future__ import annotations

import argparse
import bisect
import csv
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rec as recording  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
OK_STATUS = ("PASS", "SKIP", "INFO")  # INFO: a measurement with no pass mark
CSV_HEAD = ["label", "time", "device", "allocated_mb", "reserved_mb", "peak_mb", "nvml_used_mb"]


def write(out: str | None, res: dict) -> int:
    if out:
        with open(out, "w") as fh:
            json.dump(res, fh, indent=1)
    print(f"{res['status']}: {res['summary']}")
    for p in res.get("problems", []):
        print(f"  problem: {p}")
    return 0 if res["status"] in OK_STATUS else 1


def as_int(s) -> int | None:
    if s is None or s == "":
        return None
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- train

def check_train(a: argparse.Namespace) -> int:
    problems: list[str] = []
    with open(a.torch) as fh:
        torch_run = json.load(fh)
    pid = torch_run["pid"]
    snaps = torch_run["snapshots"]

    with open(a.csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
        fh.seek(0)
        header = next(csv.reader(fh), [])
    if header[:len(CSV_HEAD)] != CSV_HEAD:
        problems.append(f"CSV header starts {header[:len(CSV_HEAD)]}, expected {CSV_HEAD}")
    for col in ("allocated_bytes", "reserved_bytes", "peak_bytes", "pid", "source"):
        if col not in header:
            problems.append(f"CSV has no {col} column")

    rec = recording.load(a.rec) if a.rec else None
    rec_snaps = [s for s in rec.snapshots if s.get("pid") == pid] if rec else []

    table = []
    exact = 0
    for s in snaps:
        label = s["label"]
        if not s.get("stable", True):
            problems.append(f"{label}: torch's counters around the snapshot call disagree "
                            f"(before {s['allocated']}/{s['reserved']}/{s['peak']}, "
                            f"after {s.get('after')}, agent's {s.get('returned')})")
        mine = [r for r in rows if r.get("label") == label and as_int(r.get("pid")) in (pid, None)]
        row = {"label": label, "torch": {k: s[k] for k in ("allocated", "reserved", "peak")}}
        if len(mine) != 1:
            problems.append(f"{label}: {len(mine)} CSV rows for pid {pid}, expected 1")
            table.append(row)
            continue
        r = mine[0]
        got = {k: as_int(r.get(f"{k}_bytes")) for k in ("allocated", "reserved", "peak")}
        row["csv"] = got
        row["source"] = r.get("source")
        row["nvml_used_bytes"] = as_int(r.get("nvml_used_bytes"))
        bad = [k for k in got if got[k] != s[k]]
        if bad:
            problems.append(f"{label}: CSV " + ", ".join(
                f"{k} {got[k]} != torch {s[k]}" for k in bad))
        else:
            exact += 1
        if r.get("source") not in ("agent", None, ""):
            problems.append(f"{label}: CSV source is {r.get('source')!r}, expected 'agent'")
        if rec is not None:
            rs = [x for x in rec_snaps if x.get("label") == label]
            if len(rs) != 1:
                problems.append(f"{label}: {len(rs)} snapshot frames in the recording for pid {pid}")
            else:
                rgot = {k: rs[0].get(k) for k in ("allocated", "reserved", "peak")}
                if rgot != got:
                    problems.append(f"{label}: recording {rgot} != CSV {got}")
        table.append(row)

    labels = [s["label"] for s in snaps]
    extra = sorted({r.get("label", "") for r in rows} - set(labels))

    by = {s["label"]: s for s in snaps}
    base, after = by.get("Training start"), by.get("After cleanup")
    cleanup_note = "no Training start / After cleanup"
    if base and after:
        diff = after["allocated"] - base["allocated"]
        if diff > 0:
            problems.append(f"After cleanup allocated {after['allocated']} B is {diff} B above "
                            f"the Training start baseline {base['allocated']} B")
            cleanup_note = f"After cleanup {diff:+d} B vs baseline"
        elif diff < 0:
            # Less than the baseline is no leak (e.g. a cleanup that also drops
            # cuBLAS workspaces); say so rather than fail.
            cleanup_note = f"After cleanup {diff:+d} B below baseline {base['allocated']} B"
        else:
            cleanup_note = f"After cleanup = baseline ({base['allocated']} B)"
    else:
        problems.append(cleanup_note)

    agent = {}
    if rec is not None:
        smp = rec.samples_of(pid)
        agent["hello"] = any(h.get("pid") == pid for h in rec.hellos)
        agent["samples"] = len(smp)
        if len(smp) > 1:
            span = (smp[-1]["t"] - smp[0]["t"]) / 1e9
            agent["rate_hz"] = round((len(smp) - 1) / span, 1) if span > 0 else 0
            agent["dropped"] = max(x.get("dropped", 0) for x in smp)
        if not agent["hello"]:
            problems.append(f"no hello frame from pid {pid} in the recording")
        if not smp:
            problems.append(f"no allocator samples from pid {pid} in the recording")
        if rec.errors:
            problems.append(f"recording has {len(rec.errors)} bad lines: {rec.errors[:2]}")

    status = "FAIL" if problems else "PASS"
    summary = (f"{exact}/{len(snaps)} snapshots equal torch's allocated/reserved/peak to the byte; "
               f"{cleanup_note}; train {torch_run.get('train_seconds')} s, "
               f"{torch_run.get('steps_per_epoch')} steps/epoch")
    if agent.get("rate_hz"):
        summary += f"; agent {agent['rate_hz']} samples/s"
    print(f"{'label':16} {'torch allocated':>16} {'gputop':>16} {'torch reserved':>16} "
          f"{'gputop':>16} {'torch peak':>16} {'gputop':>16}")
    for row in table:
        t, c = row["torch"], row.get("csv", {})
        print(f"{row['label']:16} {t['allocated']:16d} {str(c.get('allocated')):>16} "
              f"{t['reserved']:16d} {str(c.get('reserved')):>16} "
              f"{t['peak']:16d} {str(c.get('peak')):>16}")
    if extra:
        print(f"other rows in the CSV (not compared): {extra}")
    return write(a.out, {"status": status, "summary": summary, "problems": problems,
                         "rows": table, "other_labels": extra, "agent": agent,
                         "pid": pid, "device": torch_run.get("device"),
                         "torch": torch_run.get("torch")})


# ---------------------------------------------------------------- spikes

def check_spikes(a: argparse.Namespace) -> int:
    with open(a.spikes) as fh:
        sp = json.load(fh)
    rec = recording.load(a.rec)
    dev = rec.busiest_device() if a.dev < 0 else a.dev
    problems: list[str] = []
    if dev is None or dev not in rec.nvml:
        return write(a.out, {"status": "FAIL", "summary": "no NVML samples in the recording",
                             "problems": [f"{a.rec}: no nvml frames"]})
    s = rec.nvml[dev]
    thr = int(a.threshold_gib * GIB)
    slack = int(a.slack_ms * 1e6)
    found = []
    bases = []
    for x in sp["spikes"]:
        t0, t1 = x["t_start_ns"], x["t_end_ns"]
        before = s.window(t0 - 150_000_000, t0 - 5_000_000)
        base = statistics.median(before) if before else (s.at(t0) or 0)
        bases.append(base)
        win_t0 = t0 - slack
        win_t1 = t1 + slack
        i0 = bisect.bisect_left(s.t, win_t0)
        i1 = bisect.bisect_right(s.t, win_t1)
        above = [s.t[i] for i in range(i0, i1) if s.used[i] - base >= thr]
        peak = max(s.used[i0:i1], default=base)
        found.append({"i": x["i"], "seen": bool(above), "rise_gib": round((peak - base) / GIB, 3),
                      "above_ms": round((above[-1] - above[0]) / 1e6, 2) if above else 0.0,
                      "samples_above": len(above), "spike_total_ms": x.get("total_ms")})
    seen = sum(f["seen"] for f in found)

    # What a slower sampler would have seen: read the 1 kHz series at its own
    # instants, for many phases, and count the spikes it catches.
    sims = {}
    for hz in a.sim_hz:
        period = 1e9 / hz
        counts = []
        for k in range(a.phases):
            origin = s.t[0] + k * period / a.phases
            n = 0
            for x, base in zip(sp["spikes"], bases):
                w0, w1 = x["t_start_ns"] - slack, x["t_end_ns"] + slack
                j = max(0, int((w0 - origin) // period) + 1)
                while origin + j * period <= w1:
                    v = s.at(int(origin + j * period))
                    if v is not None and v - base >= thr:
                        n += 1
                        break
                    j += 1
            counts.append(n)
        sims[f"{hz:g}"] = {"mean": round(statistics.mean(counts), 2), "min": min(counts),
                           "max": max(counts), "phases": a.phases}

    if seen != len(sp["spikes"]):
        problems.append(f"only {seen} of {len(sp['spikes'])} spikes rise >= {a.threshold_gib} GiB "
                        f"in the recording")
    rate = s.rate()
    sim_txt = ", ".join(f"{hz} Hz sees {v['mean']} (range {v['min']}-{v['max']})"
                        for hz, v in sims.items())
    summary = (f"{seen}/{len(sp['spikes'])} spikes of {sp['bytes'] / GIB:g} GiB in the recording "
               f"({rate.get('rate_hz')} samples/s); simulated {sim_txt}")
    for f in found:
        print(f"  spike {f['i']:2d}: seen={f['seen']} rise {f['rise_gib']} GiB, above threshold "
              f"{f['above_ms']} ms ({f['samples_above']} samples), spike took {f['spike_total_ms']} ms")
    return write(a.out, {"status": "FAIL" if problems else "PASS", "summary": summary,
                         "problems": problems, "seen": seen, "count": len(sp["spikes"]),
                         "spikes": found, "simulated": sims, "nvml": rate, "device": dev})


# ---------------------------------------------------------------- sigkill

def check_sigkill(a: argparse.Namespace) -> int:
    rec = recording.load(a.rec)
    pid = a.pid
    problems: list[str] = []
    hello = any(h.get("pid") == pid for h in rec.hellos)
    smp = rec.samples_of(pid)
    ended = [e for e in rec.ended if e.get("pid") == pid]
    byes = [b for b in rec.byes if b.get("pid") == pid]
    snaps = [x.get("label") for x in rec.snapshots if x.get("pid") == pid]
    if not hello:
        problems.append(f"no hello from pid {pid}")
    if not smp:
        problems.append(f"no samples from pid {pid}")
    if not ended:
        problems.append(f"no 'ended' frame for pid {pid}")
    if byes:
        problems.append(f"a bye frame for pid {pid}, though it was killed")
    gap_ms = last_before_kill_ms = None
    if smp:
        ts = [x["t"] for x in smp]
        gap_ms = round(max((b - c for c, b in zip(ts, ts[1:])), default=0) / 1e6, 1)
        if a.kill_ns:
            last_before_kill_ms = round((a.kill_ns - ts[-1]) / 1e6, 1)
            if last_before_kill_ms > a.max_lag_ms:
                problems.append(f"last sample {last_before_kill_ms} ms before the kill: samples "
                                f"from the end of the run are missing")
        if ended and ended[0]["t"] < ts[-1]:
            problems.append("ended frame is older than the last sample")
    bad = [e for e in rec.errors if rec.last_line_complete or e != rec.errors[-1]]
    if bad:
        problems.append(f"recording has bad lines: {bad[:2]}")
    summary = (f"pid {pid}: {len(smp)} samples kept (largest gap {gap_ms} ms, last one "
               f"{last_before_kill_ms} ms before SIGKILL), snapshots {snaps}, "
               f"ended frame: {'yes' if ended else 'no'}"
               + (f" ({ended[0].get('reason', '')})" if ended else ""))
    return write(a.out, {"status": "FAIL" if problems else "PASS", "summary": summary,
                         "problems": problems, "samples": len(smp), "ended": ended,
                         "snapshots": snaps, "max_gap_ms": gap_ms,
                         "last_sample_before_kill_ms": last_before_kill_ms})


# ---------------------------------------------------------------- rate

def check_rate(a: argparse.Namespace) -> int:
    rec = recording.load(a.rec)
    problems = []
    rates = {str(d): s.rate() for d, s in rec.nvml.items()}
    if not rates:
        problems.append(f"{a.rec}: no NVML samples")
    for d, r in rates.items():
        if r["rate_hz"] < a.min_hz:
            problems.append(f"device {d}: {r['rate_hz']} samples/s < {a.min_hz}")
    summary = "; ".join(f"device {d}: {r['rate_hz']} samples/s over {r.get('seconds')} s, gaps "
                        f"median {r.get('gap_median_ms')} / p99 {r.get('gap_p99_ms')} / max "
                        f"{r.get('gap_max_ms')} ms" for d, r in rates.items()) or "no samples"
    return write(a.out, {"status": "FAIL" if problems else "PASS", "summary": summary,
                         "problems": problems, "rates": rates})


# ---------------------------------------------------------------- table

def table(a: argparse.Namespace) -> int:
    files = sorted(glob.glob(os.path.join(a.dir, "*.json")))
    rows = []
    for f in files:
        name = os.path.basename(f)[:-5]
        try:
            with open(f) as fh:
                r = json.load(fh)
            rows.append((name, r.get("status", "?"), r.get("summary", "")))
        except (OSError, ValueError) as e:
            rows.append((name, "ERROR", f"unreadable result: {e}"))
    width = max((len(n) for n, _, _ in rows), default=10)
    lines = [f"{'check':{width}}  {'status':6}  key numbers", "-" * (width + 60)]
    for n, st, su in rows:
        lines.append(f"{n:{width}}  {st:6}  {su}")
    failed = [n for n, st, _ in rows if st not in OK_STATUS]
    lines.append("-" * (width + 60))
    lines.append(f"{len(rows) - len(failed)}/{len(rows)} passed, skipped or informational"
                 + (f"; not passed: {', '.join(failed)}" if failed else ""))
    text = "\n".join(lines)
    print(text)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write("| check | status | key numbers |\n| --- | --- | --- |\n")
            for n, st, su in rows:
                fh.write(f"| {n} | {st} | {su.replace('|', '/')} |\n")
    if a.json:
        allres = {}
        for f in files:
            try:
                with open(f) as fh:
                    allres[os.path.basename(f)[:-5]] = json.load(fh)
            except (OSError, ValueError):
                pass
        with open(a.json, "w") as fh:
            json.dump(allres, fh, indent=1)
    return 1 if failed else 0


def result(a: argparse.Namespace) -> int:
    write(a.out, {"status": a.status, "summary": a.summary})
    return 0  # written: the status is in the file, not in the exit code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("train", help="allocator numbers in gputop's CSV vs torch's own")
    p.add_argument("--torch", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--rec")
    p.add_argument("--out")
    p = sub.add_parser("spikes", help="count spikes.py's spikes in a recording")
    p.add_argument("--spikes", required=True)
    p.add_argument("--rec", required=True)
    p.add_argument("--dev", type=int, default=-1, help="NVML device (default: the busiest)")
    p.add_argument("--threshold-gib", type=float, default=3.0)
    p.add_argument("--slack-ms", type=float, default=10.0)
    p.add_argument("--sim-hz", type=float, nargs="*", default=[10.0, 4.0])
    p.add_argument("--phases", type=int, default=50)
    p.add_argument("--out")
    p = sub.add_parser("sigkill", help="a killed job's history in a recording")
    p.add_argument("--rec", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--kill-ns", type=int, default=0)
    p.add_argument("--max-lag-ms", type=float, default=500.0)
    p.add_argument("--out")
    p = sub.add_parser("rate", help="achieved NVML sample rate of a recording")
    p.add_argument("--rec", required=True)
    p.add_argument("--min-hz", type=float, default=990.0)
    p.add_argument("--out")
    p = sub.add_parser("result", help="write a result by hand (skipped or broken steps)")
    p.add_argument("--out", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--summary", required=True)
    p = sub.add_parser("table", help="print the pass/fail table of a results folder")
    p.add_argument("dir")
    p.add_argument("--md")
    p.add_argument("--json")
    a = ap.parse_args(argv)
    if a.dry_run:
        print("check.py: dry run ok")
        return 0
    cmds = {"train": check_train, "spikes": check_spikes, "sigkill": check_sigkill,
            "rate": check_rate, "result": result, "table": table}
    if a.cmd not in cmds:
        ap.print_usage()
        return 2
    return cmds[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
