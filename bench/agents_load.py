#!/usr/bin/env python3
"""What many agents cost a long-running gputop, measured on the real binary.

    PYTHONPATH=agent python3 bench/agents_load.py --gputop bin/gputop --out agents.json

A driver speaking the agent protocol (testdata/protocol/README.md; frames
encoded by the agent's own gputop._wire) plays training processes against
`gputop serve --source agent` (no GPU needed), each phase on a fresh gputop:

  short       --short (50,000) short-lived agents, one after another on
              --workers (4) threads: each connects, says hello, sends
              --samples (3) samples and bye, and waits for gputop to close.
              Then gputop's RSS (VmRSS, VmHWM) and its CPU over --idle (10) s
              of quiet, and the CPU it used while they ran.
  big-argv    --big (500) short-lived agents whose argv is --big-argv-bytes
              (1,000,000) long: RSS after.
  concurrent  --concurrent (10,000) connections opened at once, each with a
              hello, held: how many gputop holds and how many it refuses
              (a reply naming its limit), its RSS and CPU while they are held.
  tui         with --tui: the short phase against the TUI (`gputop --source
              agent` in a 160x50 tmux session on a private tmux server), then
              its idle CPU, its RSS and the latency of a key: `1` (hide or
              show the process pane) pressed --keys (10) times, each timed
              until the screen shows the change (tmux capture-pane polled).

--baseline BIN runs every phase with BIN too (an earlier build), for a
before/after table. CPU% is of one core. The driver raises its own soft
RLIMIT_NOFILE to its hard limit; gputop (Go) does the same for itself.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "agent"))
from common import CLK_TCK, cpu_ticks, status_kib, stop_proc  # noqa: E402

from gputop import _wire  # noqa: E402

TMUX_SOCKET = "gputop-agents-bench"  # a private tmux server
UUID = "GPU-agents-bench-0"


class _RLimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_ulong), ("max", ctypes.c_ulong)]


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (the
    stdlib's resource module is shadowed here by bench/resource.py)."""
    libc = ctypes.CDLL(None, use_errno=True)
    lim = _RLimit()
    if libc.getrlimit(7, ctypes.byref(lim)) != 0:  # RLIMIT_NOFILE
        return 1024
    lim.cur = lim.max
    libc.setrlimit(7, ctypes.byref(lim))
    return lim.max


def hello(pid: int, argv: list[str]) -> bytes:
    return _wire.encode({"type": "hello", "v": _wire.VERSION, "pid": pid, "argv": argv, "torch": "2.11.0",
                         "devices": [{"index": 0, "uuid": UUID, "name": "bench GPU", "total": 80 << 30}],
                         "t": time.time_ns()})


def short_agent(sock: str, pid: int, samples: int, argv: list[str]) -> str:
    """One short-lived agent: hello, samples, bye, then until gputop closes.
    Returns "" or what went wrong (gputop's reply when it refused)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(30)
        s.connect(sock)
        out = [hello(pid, argv)]
        for i in range(samples):
            a = (i + 1) << 20
            out.append(_wire.sample_line(time.time_ns(), 0, (a, 2 * a, a, 0, 0, 0, 0), 0))
        out.append(_wire.encode({"type": "bye", "t": time.time_ns()}))
        s.sendall(b"".join(out))
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        return got.decode(errors="replace").strip()
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        s.close()


def drive_short(sock: str, n: int, first_pid: int, samples: int, workers: int, argv: list[str]) -> dict:
    errors: list[str] = []
    lock = threading.Lock()

    def work(k: int) -> None:
        for i in range(k, n, workers):
            e = short_agent(sock, first_pid + i, samples, argv)
            if e:
                with lock:
                    errors.append(e)

    t0 = time.monotonic()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"agents": n, "seconds": round(time.monotonic() - t0, 1), "errors": len(errors),
            "first_error": errors[0][:200] if errors else ""}


class Gputop:
    """A gputop listening on a fresh socket: serve, or the TUI in tmux."""

    def __init__(self, binary: str, tui: bool) -> None:
        self.dir = tempfile.mkdtemp(prefix="gputop-agents-bench-")
        self.sock = os.path.join(self.dir, "gputop.sock")
        self.tui, self.proc, self.pid = tui, None, None
        args = [os.path.abspath(binary), "--source", "agent", "--socket", self.sock]
        if tui:
            self.session = f"agents-{os.getpid()}-{time.monotonic_ns()}"
            tmux("new-session", "-d", "-s", self.session, "-x", "160", "-y", "50", "exec " + " ".join(args))
            out = tmux("list-panes", "-t", self.session, "-F", "#{pane_pid}").stdout.split()
            self.pid = int(out[0]) if out else None
        else:
            self.log = open(os.path.join(self.dir, "serve.log"), "w")
            self.proc = subprocess.Popen([args[0], "serve", *args[1:]], stdout=self.log, stderr=subprocess.STDOUT)
            self.pid = self.proc.pid
        for _ in range(200):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{binary}: no socket at {self.sock}")
        time.sleep(0.5)

    def usage(self) -> dict:
        return {"rss_mib": round((status_kib(self.pid, "VmRSS") or 0) / 1024, 1),
                "hwm_mib": round((status_kib(self.pid, "VmHWM") or 0) / 1024, 1)}

    def cpu_pct(self, seconds: float) -> float:
        c0, t0 = cpu_ticks(self.pid), time.monotonic()
        time.sleep(seconds)
        return round((cpu_ticks(self.pid) - c0) / CLK_TCK / (time.monotonic() - t0) * 100, 1)

    def screen(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.session).stdout

    def stop(self) -> None:
        if self.tui:
            tmux("kill-session", "-t", self.session)
        else:
            stop_proc(self.proc)
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", TMUX_SOCKET, "-f", "/dev/null", *args], capture_output=True, text=True)


def key_latency_ms(g: Gputop, presses: int) -> list[float]:
    """Press 1 (the process pane hides or shows) and time until the screen
    shows it: the pane's PROCESS column title goes or comes back."""
    out = []
    for _ in range(presses):
        shown = "PROCESS " in g.screen()
        t0 = time.monotonic()
        tmux("send-keys", "-t", g.session, "1")
        while ("PROCESS " in g.screen()) == shown:
            if time.monotonic() - t0 > 10:
                break
            time.sleep(0.002)
        out.append(round((time.monotonic() - t0) * 1000, 1))
        time.sleep(0.2)
    return out


def phase_short(binary: str, a: argparse.Namespace, tui: bool) -> dict:
    g = Gputop(binary, tui)
    try:
        before = g.usage()
        c0 = cpu_ticks(g.pid)
        r = drive_short(g.sock, a.short, 100_000, a.samples, a.workers, ["python", "train.py", "--lr", "3e-4"])
        r["cpu_s_while_driving"] = round((cpu_ticks(g.pid) - c0) / CLK_TCK, 1)
        time.sleep(2)
        r["idle_cpu_pct"] = g.cpu_pct(a.idle)
        r.update(g.usage())
        r["rss_mib_at_start"] = before["rss_mib"]
        if tui:
            r["pane_footer"] = [ln.strip() for ln in g.screen().splitlines() if "of " in ln and "processes" in ln][:1]
            lat = key_latency_ms(g, a.keys)
            r["key_ms_median"], r["key_ms_max"] = statistics.median(lat), max(lat)
        return r
    finally:
        g.stop()


def phase_big_argv(binary: str, a: argparse.Namespace) -> dict:
    g = Gputop(binary, False)
    try:
        before = g.usage()
        r = drive_short(g.sock, a.big, 200_000, 1, a.workers, ["python", "x" * a.big_argv_bytes])
        time.sleep(2)
        r.update(g.usage())
        r["rss_mib_at_start"] = before["rss_mib"]
        return r
    finally:
        g.stop()


def phase_concurrent(binary: str, a: argparse.Namespace) -> dict:
    g = Gputop(binary, False)
    conns: list[socket.socket] = []
    try:
        before = g.usage()
        c0, t0 = cpu_ticks(g.pid), time.monotonic()
        failed, early, why = 0, 0, ""
        for i in range(a.concurrent):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(g.sock)
            except OSError as e:
                failed += 1
                why = why or f"{type(e).__name__}: {e}"
                s.close()
                continue
            try:
                s.sendall(hello(300_000 + i, ["python", "train.py"]))
            except OSError:
                early += 1  # closed before the hello went out: refused, its reply read below
            conns.append(s)
        time.sleep(3)
        held = refused = closed = 0
        reason = ""
        for s in conns:
            s.setblocking(False)
            try:
                b = s.recv(4096)
            except BlockingIOError:
                held += 1
                continue
            except OSError:
                closed += 1
                continue
            if b and b'"ok":false' in b:
                refused += 1
                reason = reason or json.loads(b.split(b"\n")[0]).get("error", "")
            else:
                closed += 1
        r = {"attempted": a.concurrent, "connect_failed": failed, "connect_error": why, "held": held, "refused": refused,
             "refused_before_hello_sent": early,
             "closed_otherwise": closed, "reason": reason,
             "cpu_pct_while_opening": round((cpu_ticks(g.pid) - c0) / CLK_TCK / (time.monotonic() - t0) * 100, 1)}
        r["idle_cpu_pct_holding"] = g.cpu_pct(a.idle)
        r.update(g.usage())
        r["rss_mib_at_start"] = before["rss_mib"]
        return r
    finally:
        for s in conns:
            s.close()
        g.stop()


def run_all(binary: str, a: argparse.Namespace) -> dict:
    out = {"binary": binary}
    for name in a.phases:
        if name == "tui" and not a.tui:
            continue
        print(f"{binary}: {name} ...", file=sys.stderr, flush=True)
        out[name] = {"short": lambda: phase_short(binary, a, False), "big-argv": lambda: phase_big_argv(binary, a),
                     "concurrent": lambda: phase_concurrent(binary, a), "tui": lambda: phase_short(binary, a, True)}[name]()
        print(f"  {json.dumps(out[name])}", file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--baseline", help="an earlier build to run every phase with too")
    ap.add_argument("--short", type=int, default=50_000, help="short-lived agents (50000)")
    ap.add_argument("--samples", type=int, default=3, help="samples each short-lived agent sends (3)")
    ap.add_argument("--workers", type=int, default=4, help="driver threads (4)")
    ap.add_argument("--big", type=int, default=500, help="agents with a long argv (500)")
    ap.add_argument("--big-argv-bytes", type=int, default=1_000_000)
    ap.add_argument("--concurrent", type=int, default=10_000, help="connections opened at once (10000)")
    ap.add_argument("--idle", type=float, default=10, help="seconds of quiet measured (10)")
    ap.add_argument("--tui", action="store_true", help="also the TUI phase (needs tmux)")
    ap.add_argument("--keys", type=int, default=10, help="key presses timed in the TUI (10)")
    ap.add_argument("--phases", nargs="+", default=["short", "big-argv", "concurrent", "tui"],
                    choices=["short", "big-argv", "concurrent", "tui"])
    ap.add_argument("--out", help="JSON file for the results")
    ap.add_argument("--dry-run", action="store_true",
                    help="check the arguments, the frames and the binary's presence; run nothing")
    a = ap.parse_args()
    if a.dry_run:
        hello(1, ["python", "train.py"])
        print(f"agents_load.py: dry run: frames encode; would run {', '.join(a.phases)} with {a.gputop}"
              + (f" and {a.baseline}" if a.baseline else "") + f" ({a.short} short-lived agents, {a.concurrent} at once)")
        return 0
    if (hard := raise_fd_limit()) < a.concurrent + 100:
        ap.error(f"--concurrent {a.concurrent}: the descriptor limit is {hard}")
    if a.tui and not shutil.which("tmux"):
        ap.error("--tui needs tmux")
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cmd": " ".join(sys.argv), "cpus": os.cpu_count(),
               "runs": [run_all(b, a) for b in [a.gputop, *([a.baseline] if a.baseline else [])]]}
    if a.tui:
        tmux("kill-server")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(results, fh, indent=1)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
