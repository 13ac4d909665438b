#!/usr/bin/env python3
"""gputop's own CPU and memory cost, beside a training job.

    python3 bench/resource.py --gputop bin/gputop --out resource.json

Beside a training job (bench/workloads/train_mlp.py, attached to the TUI so
that it draws allocator series and markers as it would for a user), one
after the other, each for --seconds (60):
  1. gputop's TUI at its defaults (1 kHz sampling, --fps at its default) in a real
     terminal: a tmux session of 160x50 on a private tmux server, alone, as
     a user runs it;
  2. then, together: `gputop record` headless (default rate), and nvtop
     (-d 1: 10 Hz) and nvitop (--interval 0.25: 4 Hz), each in its own 160x50
     tmux session, where they are installed (otherwise skipped and said so).
With --together everything runs at once instead; two programs reading NVML
1000 times a second then slow each other's reads down.
With --metrics-compare it measures the TUI alone instead, without and with
--metrics (the endpoint scraped once a second, as a Prometheus would be
told to), alternating --rounds times, and checks that the endpoint costs
at most --metrics-cpu-limit points of a core (0.2). With --baseline BIN it
measures the TUI of BIN (an earlier build) and of --gputop in turn, the
same way, and checks that this build adds at most --baseline-cpu-limit
points of a core (0.2) and --baseline-rss-limit-mib MiB of anonymous
memory (0.5): the host's drift, which moves single runs by a point, falls
on both.
After --warmup seconds it reads each monitor's /proc/PID/stat (utime +
stime) and /proc/PID/status (VmRSS, VmHWM) once a second for --seconds.
CPU% is of one core. The TUI's last screen is saved.

With --tools it makes issue #29's table instead, in one run beside one
training job with the agent attached: the gputop TUI at 1 kHz and at
--rate 100, `gputop record` at 1 kHz, `nvidia-smi -lms 1` (text),
nvtop -d 1, nvitop at its default interval and at 0.25 s, each alone in a
--size pty (tmux; record headless), for --seconds after --warmup,
--rounds times in alternating order (forward, then backward); the mean
CPU % of one core and RSS of each (tools not installed are skipped and
said so), gputop's split into its sampling thread (gputop-nvml) and the
Go side; then a CPU profile of the TUI at 1 kHz (GPUTOP_CPUPROFILE, in a
run of its own so that profiling costs none of the measured runs) with
its top --top entries, read without Go.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import rec as recording  # noqa: E402
from common import (CLK_TCK, children, comm, cpu_ticks, pprof_top, status_kib, stop_proc,  # noqa: E402
                    thread_ticks, write_result)

TMUX_SOCKET = "gputop-bench"  # a private tmux server: the user's sessions are not touched


def tmux(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", TMUX_SOCKET, "-f", "/dev/null", *args],
                          capture_output=True, text=True, check=check)


def save_screen(session: str, path: str, escapes: bool = False) -> None:
    """What the tmux session's pane shows, written to path (with its colours
    as escape sequences when escapes)."""
    scr = tmux("capture-pane", *(["-e"] if escapes else []), "-p", "-t", session)
    with open(path, "w") as fh:
        fh.write(scr.stdout)


def start_in_tmux(session: str, cmd: str, want: str, width: int, height: int) -> int | None:
    """Run cmd in a detached tmux session of the given size; return the pid of `want`."""
    r = tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), f"exec {cmd}")
    if r.returncode != 0:
        print(f"resource.py: tmux new-session {session}: {r.stderr.strip()}", file=sys.stderr)
        return None
    time.sleep(0.5)
    r = tmux("list-panes", "-t", session, "-F", "#{pane_pid}")
    if r.returncode != 0 or not r.stdout.strip():
        return None
    pid = int(r.stdout.split()[0])
    # `exec` makes the pane's shell become the program; look one level down
    # in case a wrapper stayed.
    if want in comm(pid):
        return pid
    for c in children(pid):
        if want in comm(c):
            return c
    return pid


class Probe:
    def __init__(self, name: str, pid: int | None, note: str = "") -> None:
        self.name, self.pid, self.note = name, pid, note
        self.t0 = self.c0 = None
        self.threads0: dict[str, int] = {}
        self.rss: list[int] = []
        self.anon: list[int] = []  # RssAnon: the heap, stacks; RssFile: the binary's and libraries' pages
        self.file: list[int] = []
        self.result: dict = {}

    def begin(self) -> None:
        if self.pid:
            self.t0, self.c0 = time.monotonic(), cpu_ticks(self.pid)
            self.threads0 = thread_ticks(self.pid)

    def sample(self) -> None:
        if self.pid:
            v = status_kib(self.pid, "VmRSS")
            if v is not None:
                self.rss.append(v)
            for key, into in (("RssAnon", self.anon), ("RssFile", self.file)):
                v = status_kib(self.pid, key)
                if v is not None:
                    into.append(v)

    def end(self) -> None:
        if not self.pid or self.c0 is None:
            self.result = {"status": "not run", "note": self.note}
            return
        c1 = cpu_ticks(self.pid)
        if c1 is None:
            self.result = {"status": "exited during the measurement", "note": self.note}
            return
        wall = time.monotonic() - self.t0
        hwm = status_kib(self.pid, "VmHWM")
        smaps = rss_by_mapping(self.pid)
        threads = {k: round((v - self.threads0.get(k, 0)) / CLK_TCK / wall * 100, 2)
                   for k, v in thread_ticks(self.pid).items()}
        self.result = {
            "status": "ok", "pid": self.pid, "seconds": round(wall, 1),
            "cpu_pct_of_one_core": round((c1 - self.c0) / CLK_TCK / wall * 100, 2),
            "rss_mib_mean": round(sum(self.rss) / len(self.rss) / 1024, 1) if self.rss else None,
            "rss_mib_max": round(max(self.rss) / 1024, 1) if self.rss else None,
            "hwm_mib": round(hwm / 1024, 1) if hwm else None,
            "rss_anon_mib_mean": round(sum(self.anon) / len(self.anon) / 1024, 1) if self.anon else None,
            "rss_file_mib_mean": round(sum(self.file) / len(self.file) / 1024, 1) if self.file else None,
            "cpu_pct_by_thread": threads,  # exited threads are missing
            "rss_by_mapping": smaps,  # at the end
            "note": self.note,
        }






def rss_by_mapping(pid: int) -> list[dict]:
    """pid's resident memory from /proc/PID/smaps, summed by what is mapped:
    each file by its base name (the program, each library), anonymous
    memory (the Go heap, stacks) as "[anon]", [heap], [stack] and the like
    as named; largest first, in KiB, with the anonymous part of each."""
    out: dict[str, dict] = {}
    cur = None
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            for line in fh:
                head = line.split(None, 1)[0]
                if not head.endswith(":"):  # a mapping's first line: range perms offset dev inode [path]
                    parts = line.split(None, 5)
                    path = parts[5].strip() if len(parts) > 5 else ""
                    name = os.path.basename(path) if path.startswith("/") else (path or "[anon]")
                    cur = out.setdefault(name, {"mapping": name, "rss_kib": 0, "anon_kib": 0})
                elif cur is not None and head in ("Rss:", "Anonymous:"):
                    cur["rss_kib" if head == "Rss:" else "anon_kib"] += int(line.split()[1])
    except OSError:
        return []
    return sorted((m for m in out.values() if m["rss_kib"]), key=lambda m: -m["rss_kib"])


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scraper:
    """GETs a /metrics URL once a second from a thread, as Prometheus would."""

    def __init__(self, url: str) -> None:
        import threading
        self.url, self.ok, self.errors, self.last_error = url, 0, 0, ""
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        import urllib.request
        while not self._stop.wait(1.0):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    if b"gputop_" in r.read():
                        self.ok += 1
                        continue
                self.errors += 1
            except OSError as e:
                self.errors += 1
                self.last_error = str(e)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(10)


def alternate(a: argparse.Namespace, width: int, height: int, name: str,
              variants: list[tuple[str, str, str, bool]]) -> list[dict] | None:
    """Runs each variant's TUI (mode, what the probe says, gputop binary,
    scraped or not) in turn beside one job, a.rounds times in ABBA order,
    each for a.seconds; their probes' results, or None when a run could not
    be measured (the result says so)."""
    if not shutil.which("tmux"):
        write_result(a.results_dir, name, "FAIL", "tmux not installed")
        return None
    work = a.workdir or tempfile.mkdtemp(prefix="gputop-resource-")
    os.makedirs(work, exist_ok=True)
    sock = os.path.join(work, "res-alternate.sock")
    log = open(os.path.join(work, f"{name}.log"), "a")
    job = None
    runs: list[dict] = []
    try:
        if not a.no_job:
            env = dict(os.environ, GPUTOP_SOCKET=sock, PYTHONUNBUFFERED="1")
            env["PYTHONPATH"] = os.path.join(REPO, "agent") + (
                os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            job = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "workloads", "train_mlp.py"),
                 "--seconds", str(len(variants) * a.rounds * (a.seconds + 8) + a.warmup + 15), "--idle", "0",
                 "--out", os.path.join(work, f"{name}-train.json")],
                env=env, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(a.warmup)
        for r in range(a.rounds):
            # ABBA: each variant first in every other round, so what drifts
            # with the job's time (its phases, the host) falls on both alike
            for mode, label, binary, scraped in (variants if r % 2 == 0 else variants[::-1]):
                addr = f"127.0.0.1:{free_port()}"
                cmd = f"{binary} --socket {sock} --source {a.source}" + (f" --metrics {addr}" if scraped else "")
                for _ in range(3):  # the private tmux server may still be exiting after the last session
                    pid = start_in_tmux("gputop", f"{cmd} 2>{work}/{name}-{mode}-{r}.stderr", "gputop",
                                        width, height)
                    if pid:
                        break
                    time.sleep(1.0)
                probe = Probe(f"gputop TUI, {label}", pid, f"round {r + 1}")
                time.sleep(3)  # the agent reconnects (backoff up to 1 s), the screen settles
                scraper = Scraper(f"http://{addr}/metrics") if scraped else None
                probe.begin()
                t_end = time.monotonic() + a.seconds
                while time.monotonic() < t_end:
                    probe.sample()
                    time.sleep(1.0)
                probe.end()
                if scraper:
                    scraper.stop()
                tmux("kill-session", "-t", "gputop")  # SIGHUP: the TUI ends as on q
                for _ in range(50):
                    if not pid or not os.path.exists(f"/proc/{pid}"):
                        break
                    time.sleep(0.1)
                res = dict(probe.result, mode=mode, round=r + 1)
                if scraper:
                    res.update(scrapes_ok=scraper.ok, scrape_errors=scraper.errors, scrape_error=scraper.last_error)
                runs.append(res)
                print(f"resource.py: round {r + 1}, {label}: {res.get('cpu_pct_of_one_core')}% of a core, "
                      f"RSS {res.get('rss_mib_mean')} MiB"
                      + (f", {scraper.ok} scrapes answered, {scraper.errors} failed" if scraper else ""))
    finally:
        tmux("kill-server")
        stop_proc(job, signal.SIGTERM)
        log.close()
    with open(a.out or os.path.join(work, f"{name}.json"), "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "seconds": a.seconds, "rounds": a.rounds,
                   "size": a.size, "job": not a.no_job, "runs": runs}, fh, indent=1)
    bad = [x for x in runs if x.get("status") != "ok"]
    if bad:
        write_result(a.results_dir, name, "FAIL", f"{len(bad)} of {len(runs)} runs did not measure: "
                     + "; ".join(f"{x['mode']} round {x['round']}: {x.get('status')}" for x in bad), runs=runs)
        return None
    return runs


def mean_of(runs: list[dict], mode: str, key: str) -> float:
    xs = [x[key] for x in runs if x["mode"] == mode and x.get(key) is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def metrics_compare(a: argparse.Namespace, width: int, height: int) -> int:
    """The TUI's CPU beside the job without --metrics and with it scraped
    once a second, alternating, each for a.seconds; one result."""
    name = f"{a.prefix}resource-tui-metrics"
    runs = alternate(a, width, height, name, [("off", "--metrics off", a.gputop, False), ("on", "--metrics on", a.gputop, True)])
    if runs is None:
        return 1
    off, on = mean_of(runs, "off", "cpu_pct_of_one_core"), mean_of(runs, "on", "cpu_pct_of_one_core")
    scrapes = sum(x.get("scrapes_ok", 0) for x in runs)
    want_scrapes = int(a.rounds * (a.seconds - 2))
    diff = on - off
    ok = diff <= a.metrics_cpu_limit and scrapes >= want_scrapes
    write_result(a.results_dir, name, "PASS" if ok else "FAIL",
                 f"TUI {off:.2f}% of a core without --metrics, {on:.2f}% with it scraped every "
                 f"second ({scrapes} scrapes answered): {diff:+.2f} points (limit {a.metrics_cpu_limit:g}); "
                 f"{a.rounds} rounds of {a.seconds:g} s each, in ABBA order",
                 cpu_off=round(off, 3), cpu_on=round(on, 3), diff_points=round(diff, 3),
                 scrapes_ok=scrapes, runs=runs)
    return 0 if ok else 1


def baseline_compare(a: argparse.Namespace, width: int, height: int) -> int:
    """The TUI of a.baseline (an earlier build) and of a.gputop beside the
    same job, alternating, each for a.seconds: the change's cost in CPU and
    RSS with the host's drift shared by both."""
    name = f"{a.prefix}resource-tui-baseline"
    runs = alternate(a, width, height, name, [("baseline", "baseline", a.baseline, False), ("build", "this build", a.gputop, False)])
    if runs is None:
        return 1
    cpu = {m: mean_of(runs, m, "cpu_pct_of_one_core") for m in ("baseline", "build")}
    rss = {m: mean_of(runs, m, "rss_mib_mean") for m in ("baseline", "build")}
    anon = {m: mean_of(runs, m, "rss_anon_mib_mean") for m in ("baseline", "build")}
    dcpu, drss = cpu["build"] - cpu["baseline"], rss["build"] - rss["baseline"]
    # the gate is on anonymous memory: file pages follow how the page cache
    # holds each binary (a copy of one build measured 2.3 MiB more on the VM)
    danon = anon["build"] - anon["baseline"]
    ok = dcpu <= a.baseline_cpu_limit and danon <= a.baseline_rss_limit_mib
    write_result(a.results_dir, name, "PASS" if ok else "FAIL",
                 f"TUI {cpu['baseline']:.2f}% of a core / {rss['baseline']:.1f} MiB for the baseline, "
                 f"{cpu['build']:.2f}% / {rss['build']:.1f} MiB for this build: {dcpu:+.2f} points, "
                 f"{drss:+.1f} MiB; anon {anon['baseline']:.1f} / {anon['build']:.1f} MiB, {danon:+.1f} "
                 f"(limits +{a.baseline_cpu_limit:g}, +{a.baseline_rss_limit_mib:g}); "
                 f"{a.rounds} rounds of {a.seconds:g} s each, in ABBA order",
                 cpu_baseline=round(cpu["baseline"], 3), cpu_this=round(cpu["build"], 3),
                 rss_baseline=round(rss["baseline"], 2), rss_this=round(rss["build"], 2),
                 anon_baseline=round(anon["baseline"], 2), anon_this=round(anon["build"], 2),
                 diff_points=round(dcpu, 3), diff_mib=round(drss, 2), runs=runs)
    return 0 if ok else 1


def tool_programs(a: argparse.Namespace, sock: str, work: str) -> list[tuple[str, str, str, bool]]:
    """The programs of issue #29's table: (label, command, process name to
    find, in a pty)."""
    g = f"{a.gputop} --socket {sock} --source {a.source}"
    return [
        ("gputop TUI, NVML at 1 kHz", g, "gputop", True),
        ("gputop TUI, --rate 100", f"{g} --rate 100", "gputop", True),
        ("gputop record, 1 kHz", f"{a.gputop} record --socket {sock} --source {a.source} -o {work}/tools-REC.gputop",
         "gputop", False),
        ("nvidia-smi -lms 1 (1 kHz, text)",
         "nvidia-smi --query-gpu=timestamp,memory.used,memory.total --format=csv -lms 1", "nvidia-smi", True),
        ("nvtop -d 1 (10 Hz)", "nvtop -d 1", "nvtop", True),
        ("nvitop default", "nvitop", "nvitop", True),
        ("nvitop --interval 0.25", "nvitop --interval 0.25", "nvitop", True),
    ]


def tools_table(a: argparse.Namespace, width: int, height: int) -> int:
    """Issue #29's table: each program alone beside one training job, in
    alternating order, and a profile of the TUI last."""
    name = f"{a.prefix}resource-tools"
    if not shutil.which("tmux"):
        write_result(a.results_dir, name, "FAIL", "tmux not installed")
        return 1
    work = a.workdir or tempfile.mkdtemp(prefix="gputop-resource-")
    os.makedirs(work, exist_ok=True)
    sock = os.path.join(work, "res-tools.sock")
    progs = tool_programs(a, sock, work)
    missing = {label for label, cmd, _, _ in progs if not shutil.which(cmd.split()[0])}
    runs: dict[str, list[dict]] = {label: [] for label, _, _, _ in progs}
    log = open(os.path.join(work, f"{name}.log"), "a")
    profile = os.path.join(work, "tui-1khz.pprof")
    job = None
    try:
        if not a.no_job:
            env = dict(os.environ, GPUTOP_SOCKET=sock, PYTHONUNBUFFERED="1")
            env["PYTHONPATH"] = os.path.join(REPO, "agent") + (
                os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            n = (len(progs) - len(missing)) * a.rounds + 1
            job = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "workloads", "train_mlp.py"),
                 "--seconds", str(n * (a.seconds + a.warmup + 3) + 30), "--idle", "0",
                 "--out", os.path.join(work, f"{name}-train.json")],
                env=env, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(5)  # the job's first step
        order = [p for p in progs if p[0] not in missing]
        plan = [(r, p) for r in range(a.rounds) for p in (order if r % 2 == 0 else order[::-1])]
        plan.append((-1, order[0]))  # the profiled run of the TUI
        for r, (label, cmd, want, pty) in plan:
            env_prefix = f"GPUTOP_CPUPROFILE={profile} " if r < 0 else ""
            cmd = cmd.replace("REC", str(r))
            proc = None
            if pty:
                pid = None
                for _ in range(3):  # the private tmux server may still be exiting
                    pid = start_in_tmux("tool", f"env {env_prefix}{cmd} 2>>{work}/tools.stderr", want, width, height)
                    if pid:
                        break
                    time.sleep(1.0)
            else:
                proc = subprocess.Popen(cmd.split(), stdout=log, stderr=subprocess.STDOUT)
                pid = proc.pid
            probe = Probe(label, pid, "profiled" if r < 0 else f"round {r + 1}")
            time.sleep(a.warmup)
            probe.begin()
            t_end = time.monotonic() + a.seconds
            while time.monotonic() < t_end:
                probe.sample()
                time.sleep(1.0)
            probe.end()
            if proc:
                stop_proc(proc)
            else:
                if label.startswith("gputop"):  # what it showed: the job's rows, its process
                    save_screen("tool", os.path.join(
                        work, f"screen-round{r + 1}-{label.split(',')[-1].strip().replace(' ', '')}.txt"))
                tmux("kill-session", "-t", "tool")  # SIGHUP: gputop ends as on q (the profile written)
            for _ in range(100):
                if not pid or not os.path.exists(f"/proc/{pid}"):
                    break
                time.sleep(0.1)
            res = dict(probe.result, round=r + 1)
            if r >= 0:
                runs[label].append(res)
            print(f"resource.py: {probe.note}, {label}: {res.get('cpu_pct_of_one_core')}% of a core, "
                  f"RSS {res.get('rss_mib_mean')} MiB", flush=True)
    finally:
        tmux("kill-server")
        stop_proc(job, signal.SIGTERM)
        log.close()

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    rows = []
    for label, _, _, _ in progs:
        ok = [x for x in runs[label] if x.get("status") == "ok"]
        row = {"program": label, "rounds": len(ok),
               "cpu_pct": mean([x["cpu_pct_of_one_core"] for x in ok]),
               "rss_mib": mean([x["rss_mib_mean"] for x in ok if x.get("rss_mib_mean") is not None]),
               "runs": runs[label]}
        if label.startswith("gputop"):
            row["nvml_thread_pct"] = mean([x["cpu_pct_by_thread"].get("gputop-nvml", 0.0) for x in ok])
        if label in missing:
            row["note"] = "not installed"
        rows.append(row)
    print("\n| program | CPU of one core | RSS |\n| --- | --- | --- |")
    for row in rows:
        if row["cpu_pct"] is None:
            print(f"| {row['program']} | {row.get('note', 'not measured')} | |")
            continue
        split = ""
        if row.get("nvml_thread_pct") is not None:
            split = f" (sampling thread {row['nvml_thread_pct']:.2f}%, Go {row['cpu_pct'] - row['nvml_thread_pct']:.2f}%)"
        print(f"| {row['program']} | {row['cpu_pct']:.2f}%{split} | {row['rss_mib']:.1f} MiB |")
    print(f"\n{a.rounds} rounds of {a.seconds:g} s after {a.warmup:g} s, alternating order, "
          f"{'beside bench/workloads/train_mlp.py with the agent attached' if not a.no_job else 'no job'}, "
          f"{width}x{height} pty")
    for row in rows:  # where gputop's and nvidia-smi's resident memory is, at the end of its last run
        last = next((x for x in reversed(row["runs"]) if x.get("rss_by_mapping")), None)
        if row["program"].startswith(("gputop", "nvidia-smi")) and last:
            maps = last["rss_by_mapping"]
            print(f"\n{row['program']}: RSS by mapping at the end of round {last['round']} "
                  f"({sum(m['rss_kib'] for m in maps) / 1024:.1f} MiB)")
            for m in maps[:12]:
                print(f"  {m['rss_kib'] / 1024:7.2f} MiB  (anonymous {m['anon_kib'] / 1024:6.2f})  {m['mapping']}")
            rest = maps[12:]
            if rest:
                print(f"  {sum(m['rss_kib'] for m in rest) / 1024:7.2f} MiB  in {len(rest)} more mappings")
    top = None
    if os.path.exists(profile):
        total, top = pprof_top(profile, a.top)
        print(f"\nCPU profile of the TUI at 1 kHz ({profile}): {total:.2f} s sampled; top {a.top} by flat")
        print(f"{'flat s':>8} {'flat%':>6} {'cum s':>8} {'cum%':>6}  function")
        for fn, flat, cum in top:
            pct = (lambda x: 100 * x / total if total else 0.0)
            print(f"{flat:8.3f} {pct(flat):5.1f}% {cum:8.3f} {pct(cum):5.1f}%  {fn}")
    else:
        print(f"\nno CPU profile written at {profile}")
    with open(a.out or os.path.join(work, f"{name}.json"), "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "seconds": a.seconds, "warmup": a.warmup,
                   "rounds": a.rounds, "size": a.size, "job": not a.no_job, "rows": rows,
                   "profile": profile if top is not None else None,
                   "profile_top": [{"function": f, "flat_s": fl, "cum_s": c} for f, fl, c in (top or [])]},
                  fh, indent=1)
    if a.rounds == 0:  # the profile alone was asked for
        ok = top is not None
        write_result(a.results_dir, name, "INFO" if ok else "FAIL",
                     f"profile only: {profile}" if ok else f"no CPU profile written at {profile}")
        return 0 if ok else 1
    gputop_ok = all(r["cpu_pct"] is not None for r in rows if r["program"].startswith("gputop"))
    write_result(a.results_dir, name, "INFO" if gputop_ok else "FAIL",
                 "; ".join(f"{r['program']}: " + (f"{r['cpu_pct']:.2f}% / {r['rss_mib']:.1f} MiB"
                                                  if r["cpu_pct"] is not None else r.get("note", "not measured"))
                           for r in rows), rows=rows)
    return 0 if gputop_ok else 1


def installed_copy(path: str) -> str:
    """path copied as an installer writes it (plain writes), into a new
    directory: a binary the Go linker has just written is held in the page
    cache in a way that maps more of it at each page fault (on the VM, the
    TUI's RSS had 17.3 MiB of its binary resident run from the build, 14.2
    MiB from a copy of the same bytes), which a user's installed gputop
    does not pay."""
    out = os.path.join(tempfile.mkdtemp(prefix="gputop-bin-"), os.path.basename(path))
    shutil.copyfile(path, out)
    os.chmod(out, 0o755)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gputop", default=os.path.join(REPO, "bin", "gputop"))
    ap.add_argument("--source", default="all", choices=["all", "agent"],
                    help="gputop's sources (agent: no GPU driver needed)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=8, help="seconds before measuring (job start)")
    ap.add_argument("--size", default="160x50", help="terminal size WxH")
    ap.add_argument("--no-job", action="store_true", help="no training job beside the monitors")
    ap.add_argument("--together", action="store_true",
                    help="measure every monitor at once instead of the TUI alone first")
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    ap.add_argument("--results-dir")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--cpu-limit", type=float, default=5.0)
    # 40 MiB until the Prometheus client (client_golang: net/http, TLS,
    # protobuf) was linked for --metrics: it made the binary 19.5 MB against
    # 11.3 MB, and the TUI's RSS 42.8 MiB against 37.9 MiB on the H200, the
    # growth in the binary's file pages (BENCHMARKS.md, 2026-12-01 12:33).
    # nvitop measured 46.8 MiB beside the same job.
    ap.add_argument("--rss-limit-mib", type=float, default=45.0)
    ap.add_argument("--metrics-compare", action="store_true",
                    help="only the TUI, without and with --metrics scraped every second (see above)")
    ap.add_argument("--rounds", type=int, default=2, help="--metrics-compare: off/on pairs; --tools: rounds of the table (0: the TUI's profile alone)")
    ap.add_argument("--metrics-cpu-limit", type=float, default=0.2,
                    help="--metrics-compare: points of a core the endpoint may add")
    ap.add_argument("--baseline", metavar="BIN",
                    help="only the TUI, of BIN (an earlier build) and of --gputop in turn (see above)")
    ap.add_argument("--baseline-cpu-limit", type=float, default=0.2,
                    help="--baseline: points of a core this build may add")
    ap.add_argument("--baseline-rss-limit-mib", type=float, default=0.5,
                    help="--baseline: MiB of anonymous RSS this build may add")
    ap.add_argument("--tools", action="store_true",
                    help="issue #29's table: gputop beside nvidia-smi, nvtop and nvitop, and a profile (see above)")
    ap.add_argument("--top", type=int, default=15, help="--tools: the profile's entries printed")
    ap.add_argument("--profile", metavar="FILE",
                    help="print the top --top entries of a gputop CPU profile (GPUTOP_CPUPROFILE) and exit")
    ap.add_argument("--dry-run", action="store_true", help="check arguments and tools, then exit")
    a = ap.parse_args(argv)
    width, height = (int(x) for x in a.size.lower().split("x"))
    tools = {t: shutil.which(t) for t in ("tmux", "nvtop", "nvitop", "nvidia-smi")}
    if a.profile:
        total, top = pprof_top(a.profile, a.top)
        print(f"{a.profile}: {total:.2f} s sampled")
        for fn, flat, cum in top:
            print(f"{flat:8.3f} {cum:8.3f}  {fn}")
        return 0
    if a.dry_run:
        print(f"resource.py: tools: {tools}; gputop {a.gputop}: "
              f"{'ok' if os.access(a.gputop, os.X_OK) else 'missing'}")
        for label, cmd, _, pty in tool_programs(a, "SOCK", "WORK"):
                print(f"resource.py: --tools would run {label}: {cmd}{' (in a pty)' if pty else ''}")
        print("resource.py: dry run ok")
        return 0
    if not os.access(a.gputop, os.X_OK):
        write_result(a.results_dir, f"{a.prefix}resource-tui" + ("-metrics" if a.metrics_compare else ""),
                     "FAIL", f"{a.gputop} not found")
        return 1
    a.gputop = installed_copy(a.gputop)
    if a.baseline and os.access(a.baseline, os.X_OK):
        a.baseline = installed_copy(a.baseline)
    if a.tools:
        return tools_table(a, width, height)
    if a.metrics_compare:
        return metrics_compare(a, width, height)
    if a.baseline:
        if not os.access(a.baseline, os.X_OK):
            write_result(a.results_dir, f"{a.prefix}resource-tui-baseline", "FAIL", f"{a.baseline} not found")
            return 1
        return baseline_compare(a, width, height)

    work = a.workdir or tempfile.mkdtemp(prefix="gputop-resource-")
    os.makedirs(work, exist_ok=True)
    sock_tui = os.path.join(work, "res-tui.sock")
    sock_rec = os.path.join(work, "res-rec.sock")
    rec_path = os.path.join(work, "resource.gputop")
    log = open(os.path.join(work, "resource.log"), "a")
    probes: list[Probe] = []
    job = rec = None
    tmux_used = False
    def measure(group: list[Probe], warmup: float) -> None:
        time.sleep(warmup)
        for p in group:
            p.begin()
        t_end = time.monotonic() + a.seconds
        while time.monotonic() < t_end:
            for p in group:
                p.sample()
            time.sleep(1.0)
        for p in group:
            p.end()

    def save_tui_screen() -> None:
        save_screen("gputop", os.path.join(work, "tui-screen.ansi"), escapes=True)
        save_screen("gputop", os.path.join(work, "tui-screen.txt"))

    try:
        if not a.no_job:
            env = dict(os.environ, GPUTOP_SOCKET=sock_tui, PYTHONUNBUFFERED="1")
            env["PYTHONPATH"] = os.path.join(REPO, "agent") + (
                os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            phases = 1 if a.together else 2
            job = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "workloads", "train_mlp.py"),
                 "--seconds", str(phases * (a.seconds + a.warmup) + 15), "--idle", "0",
                 "--out", os.path.join(work, "resource-train.json")],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        if tools["tmux"]:
            tmux_used = True
            pid = start_in_tmux("gputop", f"{a.gputop} --socket {sock_tui} --source {a.source} "
                                          f"2>{work}/tui.stderr",
                                "gputop", width, height)
            tui = Probe("gputop TUI (1 kHz)", pid,
                        f"tmux {width}x{height}" + ("" if a.together else ", alone") if pid else "did not start")
        else:
            tui = Probe("gputop TUI (1 kHz)", None, "tmux not installed")
        probes.append(tui)
        if not a.together:
            measure([tui], a.warmup)
            if tmux_used:
                save_tui_screen()
                tmux("kill-session", "-t", "gputop")
        rec = subprocess.Popen([a.gputop, "record", "-o", rec_path, "--socket", sock_rec,
                                "--source", a.source],
                               stdout=log, stderr=subprocess.STDOUT)
        others = [Probe("gputop record (headless)", rec.pid)]
        for tool, cmd, label in (("nvtop", "nvtop -d 1", "nvtop (10 Hz)"),
                                 ("nvitop", "nvitop --interval 0.25", "nvitop (4 Hz)")):
            if not tools[tool]:
                others.append(Probe(label, None, f"{tool} not installed: skipped"))
            elif not tools["tmux"]:
                others.append(Probe(label, None, "tmux not installed: skipped"))
            else:
                pid = start_in_tmux(tool, cmd, tool, width, height)
                others.append(Probe(label, pid, f"tmux {width}x{height}"))
        probes.extend(others)
        measure(probes if a.together else others, a.warmup if a.together else 3)
        if tmux_used and a.together:
            save_tui_screen()
    finally:
        if tmux_used:
            tmux("kill-server")
        stop_proc(rec)
        stop_proc(job, signal.SIGTERM)

    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "seconds": a.seconds,
           "size": a.size, "job": not a.no_job, "together": a.together,
           "monitors": {p.name: p.result for p in probes}}
    if os.path.exists(rec_path):
        r = recording.load(rec_path)
        out["record_nvml"] = {str(d): s.rate() for d, s in r.nvml.items()}
    with open(a.out or os.path.join(work, "resource.json"), "w") as fh:
        json.dump(out, fh, indent=1)

    print(f"\n{'monitor':28} {'CPU % (1 core)':>15} {'RSS MiB mean':>13} {'RSS MiB max':>12}  note")
    for p in probes:
        r = p.result
        if r.get("status") == "ok":
            print(f"{p.name:28} {r['cpu_pct_of_one_core']:15.2f} {r['rss_mib_mean']:13.1f} "
                  f"{r['rss_mib_max']:12.1f}  {r['note']}")
        else:
            print(f"{p.name:28} {r.get('status'):>15}  {r.get('note', '')}")

    failed = False
    for p in probes:
        r = dict(p.result)
        name = a.prefix + "resource-" + p.name.split(" (")[0].replace("gputop ", "").lower()
        if r.get("status") != "ok":
            st = "FAIL" if p.name.startswith("gputop") else "SKIP"
            failed |= st == "FAIL"
            write_result(a.results_dir, name, st, f"{p.name}: {r.get('status')} ({r.get('note')})")
            continue
        r.pop("status")
        txt = (f"{p.name}: {r['cpu_pct_of_one_core']:.2f}% of a core, RSS {r['rss_mib_mean']:.1f} MiB "
               f"mean / {r['rss_mib_max']:.1f} max over {r['seconds']:.0f} s")
        if r.get("rss_anon_mib_mean") is not None:
            txt += f" [RSS anon {r['rss_anon_mib_mean']:.1f} / file {r['rss_file_mib_mean']:.1f} MiB]"
        if p.name.startswith("gputop") and r.get("cpu_pct_by_thread"):
            txt += " (" + ", ".join(f"{k} {v:.2f}%" for k, v in sorted(r["cpu_pct_by_thread"].items())) + ")"
        if p.name.startswith("gputop TUI"):
            ok = r["cpu_pct_of_one_core"] <= a.cpu_limit and (r["rss_mib_max"] or 0) <= a.rss_limit_mib
            failed |= not ok
            write_result(a.results_dir, name, "PASS" if ok else "FAIL",
                         txt + f" (limits {a.cpu_limit}%, {a.rss_limit_mib:g} MiB)", **r)
        else:
            if p.name.startswith("gputop record") and out.get("record_nvml"):
                txt += "; " + ", ".join(f"device {d} {v['rate_hz']} samples/s"
                                        for d, v in out["record_nvml"].items())
            write_result(a.results_dir, name, "INFO", txt, **r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
