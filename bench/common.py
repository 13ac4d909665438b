"""Helpers shared by the bench scripts: the one module they import besides
rec.py (the recording reader). Standard library only; torch is passed in
where a helper needs it.

  gputop processes   start_gputop, stop_proc
  results            write_result, check_args, work_dir
  /proc readings     schedstat, thread_cpu_ns, thread_sched_ns (this
                     process's threads); cpu_ticks, thread_ticks,
                     status_kib, comm, children (any process)
  timing             call_times_ns, quantile, pcts
  shared load        setup_cpu (the reference model's training step),
                     Bare (the least a sampling thread can do)
  agents' frames     Listener (a socket the children's agents connect to)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# ---------------------------------------------------------------- gputop processes


def stop_proc(p: subprocess.Popen | None, sig: int = signal.SIGINT) -> None:
    """Ask a child to stop (SIGINT: gputop record closes its file cleanly),
    then kill it if it has not gone within 5 s."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(sig)
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def start_gputop(binary: str, rec: str, sock: str, source: str, log) -> subprocess.Popen | None:
    """`gputop record` writing rec and listening on sock, once the socket is
    there; None (and why, in log) when it exited instead."""
    cmd = [binary, "record", "-o", rec, "--socket", sock, "--source", source]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    if p.poll() is not None:
        log.write(f"gputop record exited with {p.returncode}\n")
        return None
    return p


# ---------------------------------------------------------------- results


def write_result(d: str | None, name: str, status: str, summary: str, **kw) -> None:
    """Print one check's outcome and, with a results dir, keep it as NAME.json
    for scripts/gpu-check.sh's table."""
    print(f"{name}: {status}: {summary}")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".json"), "w") as fh:
            json.dump({"status": status, "summary": summary, **kw}, fh, indent=1)


def check_args(doc: str, name: str, workdir_holds: str) -> argparse.Namespace:
    """The options of a check that runs beside `gputop record`: the binary,
    where results go, the result's name, and a work dir for what it holds."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default=name)
    ap.add_argument("--workdir", help=f"for {workdir_holds} (default: a temp dir)")
    return ap.parse_args()


def parts_parser(doc: str, name: str, parts: list[str], children: list[str], child_timeout: float,
                 dry_run_checks: str) -> argparse.ArgumentParser:
    """The options of a check made of parts, each run in torch children
    that report to one socket (run_parts): --only picks parts; --child and
    --socket are how the check starts itself as a child."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0], epilog=doc.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default=name)
    ap.add_argument("--workdir", help="for the children's logs (default: a temp dir)")
    ap.add_argument("--only", nargs="*", choices=parts, help="run only these parts")
    ap.add_argument("--python", default=sys.executable, help="the Python of the children (with torch)")
    ap.add_argument("--child-timeout", type=float, default=child_timeout)
    ap.add_argument("--child", choices=children, help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true", help=f"without a GPU: {dry_run_checks}")
    return ap


def run_parts(a: argparse.Namespace, parts: dict, tag: str) -> int:
    """Run each part of parts (name -> fn(a, listener, workdir) giving a list
    of (result name, status, summary, extra)) that --only leaves in, against
    one Listener: each result written, a table printed last; 1 if any failed."""
    work = a.workdir or tempfile.mkdtemp(prefix=f"gputop-{tag}-")
    os.makedirs(work, exist_ok=True)
    srv = Listener(os.path.join(tempfile.mkdtemp(prefix="gl"), "s.sock"))  # short: sun_path is 108 bytes
    table, failed = [], False
    try:
        for part, check in parts.items():
            if a.only and part not in a.only:
                continue
            t = time.monotonic()
            try:
                results = check(a, srv, work)
            except Exception as e:  # one part's crash must not hide the others
                results = [(part, "FAIL", f"{type(e).__name__}: {e}", {})]
            secs = time.monotonic() - t
            for name, status, txt, extra in results:
                write_result(a.results_dir, f"{a.name}-{name}", status, txt, **extra)
                table.append((name, status, secs, txt))
                failed = failed or status == "FAIL"
    finally:
        srv.close()
    print("\ncheck         status   secs  summary")
    for name, status, secs, txt in table:
        print(f"{name:<13} {status:<7} {secs:>5.0f}  {txt[:220]}")
    return 1 if failed else 0


def work_dir(a: argparse.Namespace, tag: str) -> str:
    """--workdir, made if need be, else a new temp dir named for tag."""
    work = a.workdir or tempfile.mkdtemp(prefix=f"gputop-{tag}.")
    os.makedirs(work, exist_ok=True)
    return work


# ---------------------------------------------------------------- /proc readings

CLK_TCK = os.sysconf("SC_CLK_TCK")  # the unit of /proc/PID/stat's CPU times


def schedstat(tid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting for one) of thread tid of this process, from
    /proc/self/task/TID/schedstat, or None where the kernel does not say."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            f = fh.read().split()
        return int(f[0]), int(f[1])
    except (OSError, ValueError, IndexError):
        return None


def thread_cpu_ns(tid: int | None) -> int | None:
    """CPU time of one thread of this process, in ns (schedstat's first
    field), or None where the kernel does not say."""
    if not tid:
        return None
    s = schedstat(tid)
    return s[0] if s is not None else None


def thread_sched_ns(tid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting for one) of the calling thread. The CPU time
    comes from the thread's clock: schedstat's lags by up to a scheduler
    tick while the thread runs, as much as the effect measured here."""
    s = schedstat(tid)
    if s is None:
        return None
    return time.thread_time_ns(), s[1]


def _stat_fields(path: str) -> list[str]:
    """The fields of a /proc .../stat file after the command name (which may
    hold spaces and parentheses): the first is field 3, the state."""
    with open(path) as fh:
        s = fh.read()
    return s[s.rfind(")") + 2:].split()


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat), in
    CLK_TCK ticks; None when it is gone."""
    try:
        rest = _stat_fields(f"/proc/{pid}/stat")
    except OSError:
        return None
    return int(rest[11]) + int(rest[12])


def thread_ticks(pid: int) -> dict[str, int]:
    """CPU ticks (utime + stime) of a process's threads, summed by thread
    name: gputop's Go threads are "gputop", its sampling thread
    "gputop-nvml"."""
    out: dict[str, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                name = fh.read().strip()
            rest = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
        out[name] = out.get(name, 0) + int(rest[11]) + int(rest[12])
    return out


def status_kib(pid: int, key: str) -> int | None:
    """A kB figure of /proc/PID/status (VmRSS, VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def comm(pid: int) -> str:
    """A process's command name, "" when it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The processes whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(_stat_fields(f"/proc/{d}/stat")[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


# ---------------------------------------------------------------- timing


def call_times_ns(fn, n: int, warmup: int = 0, gap: float = 0.0) -> list[int]:
    """How long each of n calls of fn took, in ns, sorted; after warmup
    untimed calls, and with gap seconds of sleep before each call when
    given (a cold call, as a snapshot once an epoch is)."""
    for _ in range(warmup):
        fn()
    ns = []
    for _ in range(n):
        if gap:
            time.sleep(gap)
        t = time.perf_counter_ns()
        fn()
        ns.append(time.perf_counter_ns() - t)
    ns.sort()
    return ns


def quantile(v: list[int], q: float) -> int:
    """The value at quantile q of the sorted list v (the median is q 0.5)."""
    return v[min(len(v) - 1, int(len(v) * q))]


def pcts(ns: list[int]) -> dict:
    """n, median, p90, p99 and max of ns in µs, to 0.1."""
    v = sorted(ns)
    if not v:
        return {"n": 0}
    return {"n": len(v), "median_us": round(quantile(v, 0.5) / 1e3, 1),
            "p90_us": round(quantile(v, 0.9) / 1e3, 1),
            "p99_us": round(quantile(v, 0.99) / 1e3, 1),
            "max_us": round(v[-1] / 1e3, 1)}


# ---------------------------------------------------------------- shared load


def setup_cpu(torch, nn, device: str = "cuda"):
    """The reference article's model and its trainer's step, at its batch size."""
    dev = torch.device(device)
    model = nn.Sequential(
        nn.Linear(100, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    crit = nn.CrossEntropyLoss()
    batches = [(torch.randn(64, 100, device=dev), torch.randint(0, 10, (64,), device=dev))
               for _ in range(32)]
    state = {"i": 0}

    def step() -> float:
        x, y = batches[state["i"] % len(batches)]
        state["i"] += 1
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.item()

    return step


class Bare(threading.Thread):
    """The least a sampling thread can do at hz: wake from poll() as the
    agent does and, given a stats call, make it and drop its result."""

    def __init__(self, hz: float, fn=None) -> None:
        super().__init__(daemon=True)
        self.period, self.n, self.fn = 1.0 / hz, 0, fn
        self.halt = threading.Event()

    def run(self) -> None:
        wait, mono, fn = select.poll().poll, time.monotonic, self.fn
        nxt = mono()
        while not self.halt.is_set():
            ms = math.ceil((nxt - mono()) * 1000)
            wait(ms if ms > 0 else 0)
            if fn is not None:
                fn()
            self.n += 1
            nxt += self.period
            if nxt <= mono():
                nxt = mono() + self.period


# ---------------------------------------------------------------- agents' frames


class Listener:
    """A Unix socket the children's agents connect to: every frame each sends,
    by the pid of its hello."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.frames: dict[int, list[dict]] = {}
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c: socket.socket) -> None:
        buf, pid = b"", None
        with c:
            while True:
                try:
                    d = c.recv(1 << 16)
                except OSError:
                    return
                if not d:
                    return
                buf += d
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        f = json.loads(line)
                    except ValueError:
                        continue
                    if f.get("type") == "hello":
                        pid = f.get("pid")
                    if pid is not None:
                        with self.lock:
                            self.frames.setdefault(pid, []).append(f)

    def of(self, pid: int, typ: str) -> list[dict]:
        with self.lock:
            return [f for f in self.frames.get(pid, []) if f.get("type") == typ]

    def close(self) -> None:
        self.srv.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _pb_fields(buf: bytes):
    """The fields of one protocol-buffer message: (number, wire type, value),
    value an int for varints and fixed ints, bytes for length-delimited."""
    i, n = 0, len(buf)

    def varint() -> int:
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return v
            shift += 7

    while i < n:
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 1:
            yield num, wt, int.from_bytes(buf[i:i + 8], "little")
            i += 8
        elif wt == 2:
            ln = varint()
            yield num, wt, buf[i:i + ln]
            i += ln
        elif wt == 5:
            yield num, wt, int.from_bytes(buf[i:i + 4], "little")
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wt} at byte {i}")


def _pb_ints(wt: int, v) -> list[int]:
    """A repeated integer field's values: packed (bytes) or one."""
    if wt != 2:
        return [v]
    out, i = [], 0
    while i < len(v):
        x = shift = 0
        while True:
            b = v[i]
            i += 1
            x |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        out.append(x)
    return out


def pprof_top(path: str, n: int = 15) -> tuple[float, list[tuple[str, float, float]]]:
    """A Go CPU profile (runtime/pprof's gzipped profile.proto) as `go tool
    pprof -top` reads it, where Go is missing: the seconds sampled, and the n
    functions with the most CPU of their own (flat), each with its flat and
    cumulative seconds (inlined frames count as their own functions)."""
    import gzip
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings: list[str] = []
    funcs: dict[int, int] = {}  # function id -> name's string index
    locs: dict[int, list[int]] = {}  # location id -> function ids, innermost first
    samples: list[tuple[list[int], list[int]]] = []
    for num, wt, v in _pb_fields(data):
        if num == 2:  # Sample: location_id (1), value (2)
            ids, vals = [], []
            for f, w, x in _pb_fields(v):
                if f == 1:
                    ids += _pb_ints(w, x)
                elif f == 2:
                    vals += _pb_ints(w, x)
            samples.append((ids, vals))
        elif num == 4:  # Location: id (1), line (4) with function_id (1)
            lid, fids = 0, []
            for f, w, x in _pb_fields(v):
                if f == 1:
                    lid = x
                elif f == 4:
                    fids += [y for g, _, y in _pb_fields(x) if g == 1]
            locs[lid] = fids
        elif num == 5:  # Function: id (1), name (2)
            fid = name = 0
            for f, _, x in _pb_fields(v):
                if f == 1:
                    fid = x
                elif f == 2:
                    name = x
            funcs[fid] = name
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))
    flat: dict[str, float] = {}
    cum: dict[str, float] = {}
    total = 0.0
    for ids, vals in samples:
        secs = (vals[-1] if vals else 0) / 1e9  # the last value: CPU nanoseconds
        total += secs
        names = [strings[funcs.get(f, 0)] for lid in ids for f in locs.get(lid, [])]
        if names:
            flat[names[0]] = flat.get(names[0], 0.0) + secs
        for nm in set(names):
            cum[nm] = cum.get(nm, 0.0) + secs
    top = sorted(flat, key=lambda k: -flat[k])[:n]
    return total, [(k, flat[k], cum[k]) for k in top]
