#!/usr/bin/env python3
"""Compare gputop's recorded NVML figures with nvidia-smi's own, aligned by time.

Two steps, run around the same job:

    python3 bench/nvml_compare.py smi --dir smi/ &     # nvidia-smi sampled until SIGINT/SIGTERM
    gputop record -o run.gputop ...                    # the job runs meanwhile
    python3 bench/nvml_compare.py compare run.gputop --dir smi/ --out nvml.json

`smi` runs `nvidia-smi --query-gpu=... -lms 100` (device memory used, MiB) and
`nvidia-smi --query-compute-apps=... -lms 200` (per-process used, MiB) and
stores each line with the time it arrived. `compare` takes every nvidia-smi
reading and looks at gputop's samples within --window-ms of its timestamp:
the difference is 0 when the reading lies between the lowest and highest
value gputop saw then, else the distance to the nearer one. Memory changes
while a job trains, and nvidia-smi's clock has millisecond resolution, so a
reading is only comparable with what gputop saw around it. The difference to
gputop's single nearest sample is reported too.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rec as recording  # noqa: E402

MIB = 1 << 20

# Field lists, tried in order: older drivers know no memory.reserved, and
# compute-apps queries may refuse a timestamp.
GPU_QUERIES = [
    ["timestamp", "uuid", "index", "memory.used", "memory.reserved", "memory.total"],
    ["timestamp", "uuid", "index", "memory.used", "memory.total"],
]
APP_QUERIES = [
    ["timestamp", "gpu_uuid", "pid", "used_memory"],
    ["gpu_uuid", "pid", "used_memory"],
]


# ---------------------------------------------------------------- sampling

class Sampler:
    """One nvidia-smi loop whose lines are stamped on arrival and written to a file."""

    def __init__(self, kind: str, queries: list[list[str]], interval_ms: int, path: str) -> None:
        self.kind, self.queries, self.interval_ms, self.path = kind, queries, interval_ms, path
        self.proc: subprocess.Popen | None = None
        self.fields: list[str] = []
        self.error = ""

    def start(self) -> bool:
        smi = shutil.which("nvidia-smi")
        if not smi:
            self.error = "nvidia-smi not found"
            return False
        # Line-buffered, so a line is stamped when nvidia-smi writes it, not
        # when a 4 KiB pipe buffer fills.
        pre = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        for fields in self.queries:
            cmd = pre + [smi, f"--query-{self.kind}={','.join(fields)}",
                         "--format=csv,noheader,nounits", f"-lms={self.interval_ms}"]
            out = open(self.path, "w")
            out.write("#fields " + ",".join(fields) + "\n#cmd " + " ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            t = threading.Thread(target=self._pump, args=(proc, out), daemon=True)
            t.start()
            deadline = time.time() + 2.0
            while time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            if proc.poll() is None or proc.returncode == 0:
                self.proc, self.fields, self._thread = proc, fields, t
                return True
            t.join(1)
            out.close()
            with open(self.path) as fh:
                self.error = fh.read()[-300:].strip()
        return False

    @staticmethod
    def _pump(proc: subprocess.Popen, out) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(f"{time.time_ns()}|{line.rstrip()}\n")
            out.flush()
        out.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc:
            self._thread.join(3)


def cmd_smi(a: argparse.Namespace) -> int:
    os.makedirs(a.dir, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    samplers = [Sampler("gpu", GPU_QUERIES, a.gpu_ms, os.path.join(a.dir, "gpu.log")),
                Sampler("compute-apps", APP_QUERIES, a.apps_ms, os.path.join(a.dir, "apps.log"))]
    ok = False
    for s in samplers:
        if s.start():
            ok = True
            print(f"nvml_compare smi: {s.kind}: {','.join(s.fields)} every {s.interval_ms} ms",
                  flush=True)
        else:
            print(f"nvml_compare smi: {s.kind}: not sampled: {s.error}", flush=True)
    if not ok:
        return 1
    stop.wait(a.duration if a.duration > 0 else None)
    for s in samplers:
        s.stop()
    return 0


# ---------------------------------------------------------------- comparing

def parse_ts(s: str) -> int | None:
    """nvidia-smi's 'YYYY/MM/DD HH:MM:SS.mmm' (local time) in ns since the epoch."""
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return int(dt.datetime.strptime(s.strip(), fmt).timestamp() * 1e9)
        except ValueError:
            pass
    return None


def read_log(path: str) -> tuple[list[str], list[dict]]:
    """Rows of an smi log as dicts of field -> text, plus 'arrival' and 't' (ns)."""
    fields: list[str] = []
    rows: list[dict] = []
    if not os.path.exists(path):
        return fields, rows
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("#fields "):
                fields = line[8:].split(",")
                continue
            if line.startswith("#") or "|" not in line:
                continue
            arrival, _, body = line.partition("|")
            vals = [v.strip() for v in body.split(",")]
            if len(vals) != len(fields):
                continue  # "No running processes found" and other notices
            row = dict(zip(fields, vals))
            row["arrival"] = int(arrival)
            row["t"] = parse_ts(row["timestamp"]) if "timestamp" in row else None
            rows.append(row)
    # nvidia-smi's own timestamp is the better clock, unless it is in another
    # time zone than ours (then it is hours off and arrival times are used).
    skews = sorted(r["arrival"] - r["t"] for r in rows if r["t"] is not None)
    use_ts = bool(skews) and abs(skews[len(skews) // 2]) < 5e9
    for r in rows:
        if not use_ts or r["t"] is None:
            r["t"] = r["arrival"]
    return fields, rows


def num(s: str) -> float | None:
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def pct(vals: list[float], p: float) -> float:
    if not vals:
        return float("nan")
    v = sorted(vals)
    return v[min(len(v) - 1, int(p * len(v)))]


def window_diff(v: float, lo: float, hi: float) -> float:
    return max(0.0, lo - v, v - hi)


def compare_device(rec: recording.Recording, rows: list[dict], w_ns: int) -> dict:
    per_dev: dict[int, dict] = {}
    for r in rows:
        dev = rec.device_for_uuid(r.get("uuid", ""))
        if dev is None:
            dev = int(r.get("index", -1))
        s = rec.nvml.get(dev)
        smi_used = num(r.get("memory.used", ""))
        if s is None or not s.t or smi_used is None:
            continue
        t = r["t"]
        if t - w_ns < s.t[0] or t + w_ns > s.t[-1]:
            continue  # outside the recording
        win = s.window(t - w_ns, t + w_ns)
        near = s.at(t)
        if not win or near is None:
            continue
        d = per_dev.setdefault(dev, {"n": 0, "win": [], "near": [], "alt": [], "steady": []})
        d["n"] += 1
        lo, hi = min(win) / MIB, max(win) / MIB
        d["win"].append(window_diff(smi_used, lo, hi))
        d["near"].append(abs(near / MIB - smi_used))
        if hi - lo <= 1:
            d["steady"].append(abs(near / MIB - smi_used))
        smi_res = num(r.get("memory.reserved", ""))
        if smi_res is not None:
            # Diagnosis only: if gputop's "used" counted reserved memory too
            # (GetMemoryInfo v1), it would match used+reserved instead.
            d["alt"].append(window_diff(smi_used + smi_res, lo, hi))
    out = {}
    for dev, d in per_dev.items():
        out[str(dev)] = {
            "readings": d["n"],
            "window_max_mib": round(max(d["win"]), 3),
            "nearest_median_mib": round(pct(d["near"], 0.5), 3),
            "nearest_p99_mib": round(pct(d["near"], 0.99), 3),
            "nearest_max_mib": round(max(d["near"]), 3),
            "steady_readings": len(d["steady"]),
            "steady_max_mib": round(max(d["steady"]), 3) if d["steady"] else None,
            "vs_smi_used_plus_reserved_window_max_mib":
                round(max(d["alt"]), 3) if d["alt"] else None,
        }
    return out


def compare_procs(rec: recording.Recording, rows: list[dict], w_ns: int) -> dict:
    frames: dict[int, list[tuple[int, dict[int, int]]]] = {}
    for f in rec.procs:
        frames.setdefault(int(f.get("dev", 0)), []).append(
            (int(f["t"]), {int(p["pid"]): int(p.get("used", 0)) for p in f.get("procs") or []}))
    for v in frames.values():
        v.sort(key=lambda x: x[0])
    smi_pids, rec_pids = set(), set()
    for v in frames.values():
        for _, m in v:
            rec_pids.update(m)
    diffs, unmatched = [], 0
    for r in rows:
        used = num(r.get("used_memory", ""))
        pid = int(num(r.get("pid", "")) or 0)
        if used is None or not pid:
            continue
        smi_pids.add(pid)
        dev = rec.device_for_uuid(r.get("gpu_uuid", ""))
        cand = frames.get(dev if dev is not None else 0, [])
        vals = [m[pid] / MIB for t, m in cand if abs(t - r["t"]) <= w_ns and pid in m]
        if not vals:
            unmatched += 1
            continue
        diffs.append(window_diff(used, min(vals), max(vals)))
    return {
        "readings": len(diffs),
        "unmatched_readings": unmatched,
        "window_max_mib": round(max(diffs), 3) if diffs else None,
        "window_p99_mib": round(pct(diffs, 0.99), 3) if diffs else None,
        "pids_nvidia_smi": sorted(smi_pids),
        "pids_gputop": sorted(rec_pids),
    }


def cmd_compare(a: argparse.Namespace) -> int:
    rec = recording.load(a.recording)
    gfields, grows = read_log(os.path.join(a.dir, "gpu.log"))
    afields, arows = read_log(os.path.join(a.dir, "apps.log"))
    dev = compare_device(rec, grows, int(a.window_ms * 1e6))
    procs = compare_procs(rec, arows, int(a.proc_window_ms * 1e6))
    problems = []
    if not grows:
        problems.append("no nvidia-smi device readings")
    if not dev:
        problems.append("no nvidia-smi reading overlaps the recording")
    for d, r in dev.items():
        if r["window_max_mib"] > a.tol_mib:
            problems.append(f"device {d}: differs by up to {r['window_max_mib']} MiB")
    if procs["readings"] and procs["window_max_mib"] > a.tol_mib:
        problems.append(f"per-process used differs by up to {procs['window_max_mib']} MiB")
    # With no process both tools could see (e.g. another PID namespace), the
    # device figures decide alone; the summary says so.
    status = "FAIL" if problems else "PASS"
    worst = max((r["window_max_mib"] for r in dev.values()), default=float("nan"))
    nmax = max((r["nearest_max_mib"] for r in dev.values()), default=float("nan"))
    n = sum(r["readings"] for r in dev.values())
    summary = (f"device used: {n} readings, max diff {worst} MiB in +-{a.window_ms:g} ms "
               f"(nearest sample: max {nmax} MiB); per-process: ")
    if procs["readings"]:
        summary += f"{procs['readings']} readings, max diff {procs['window_max_mib']} MiB"
    else:
        summary += (f"no common pid (nvidia-smi {procs['pids_nvidia_smi'][:5]}, "
                    f"gputop {procs['pids_gputop'][:5]})")
    result = {"status": status, "summary": summary, "problems": problems,
              "tolerance_mib": a.tol_mib, "window_ms": a.window_ms,
              "smi_fields": gfields, "smi_app_fields": afields,
              "devices": dev, "processes": procs, "recording": rec.summary()}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(result, fh, indent=1)
    print(f"NVML vs nvidia-smi: {status}: {summary}")
    for d, r in dev.items():
        print(f"  device {d}: {json.dumps(r)}")
    print(f"  processes: {json.dumps(procs)}")
    for p in problems:
        print(f"  problem: {p}")
    return 0 if status == "PASS" else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("smi", help="sample nvidia-smi until SIGINT/SIGTERM or --duration")
    s.add_argument("--dir", required=True)
    s.add_argument("--duration", type=float, default=0, help="seconds; 0 = until a signal")
    s.add_argument("--gpu-ms", type=int, default=100)
    s.add_argument("--apps-ms", type=int, default=200)
    c = sub.add_parser("compare", help="compare a recording with what smi sampled")
    c.add_argument("recording")
    c.add_argument("--dir", required=True)
    c.add_argument("--window-ms", type=float, default=150)
    c.add_argument("--proc-window-ms", type=float, default=700)
    c.add_argument("--tol-mib", type=float, default=2.0)
    c.add_argument("--out")
    a = ap.parse_args(argv)
    if a.dry_run:
        print("nvml_compare.py: dry run ok")
        return 0
    if a.cmd == "smi":
        return cmd_smi(a)
    if a.cmd == "compare":
        return cmd_compare(a)
    ap.print_usage()
    return 2


if __name__ == "__main__":
    sys.exit(main())
