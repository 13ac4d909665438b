#!/usr/bin/env python3
"""gputop serve --metrics beside real training: the allocator series equal
torch's own counters, and spikes between two scrapes show in _max_.

    PYTHONPATH=agent python3 bench/metrics_check.py --gputop bin/gputop --results-dir R

Starts `gputop serve --source all --metrics 127.0.0.1:PORT` and a training
child (this script with --child: an MLP trained with AdamW on the GPU, the
agent attached, RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 TORCHELASTIC_RUN_ID set as
torchrun would). The child trains for a while, then holds still: it
synchronises, prints torch.cuda.memory_stats()'s counters as a JSON line and
waits for the next command on stdin. At each hold the script scrapes
/metrics until the child's series carry exactly those values (or --settle
seconds pass) and checks their labels: pid, rank, local_rank, job_id,
Hostname, and the UUID and modelName of the GPU series they join. Between
two scrapes the child then makes two spikes: 4 GiB allocated for 5 ms and
freed back to the driver (NVML sees it at 1 kHz: gputop_nvml_used_max_bytes)
and 1 GiB held for 50 ms (the agent samples at 100 Hz:
gputop_torch_allocated_max_bytes); gputop serves them with a 3 s window
(--metrics-window), so a scrape within it must show both, a second scrape
right after it (a second Prometheus) too, and one after the window
neither.

Results: NAME-exact (every hold's counters equal torch's, labels right),
NAME-spike (both spikes seen by two scrapes in the window, gone after it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import stop_proc, write_result  # noqa: E402

JOB_ID = "gpu-check-metrics"
GIB = 1 << 30
WINDOW = 3.0  # seconds: gputop serve --metrics-window
# series of a process -> torch.cuda.memory_stats() key
TORCH_KEYS = {
    "gputop_torch_allocated_bytes": "allocated_bytes.all.current",
    "gputop_torch_reserved_bytes": "reserved_bytes.all.current",
    "gputop_torch_peak_allocated_bytes": "allocated_bytes.all.peak",
    "gputop_torch_inactive_split_bytes": "inactive_split_bytes.all.current",
    "gputop_torch_alloc_retries_total": "num_alloc_retries",
    "gputop_torch_ooms_total": "num_ooms",
}


# ---------------------------------------------------------------- the child


def child(a: argparse.Namespace) -> int:
    """The training process: holds, spikes and ends on commands from stdin."""
    import torch

    import gputop

    gputop.attach()
    dev = torch.device("cuda")
    width = 4096
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(a.batch, width, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def say(**kw) -> None:
        print(json.dumps(kw), flush=True)

    def train(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()

    def hold(i: int) -> None:
        torch.cuda.synchronize()
        s = torch.cuda.memory_stats(dev)
        say(hold=i, pid=os.getpid(), name=torch.cuda.get_device_name(dev),
            stats={k: int(s.get(k, 0)) for k in TORCH_KEYS.values()})

    i = 0
    train(a.train_seconds)
    hold(i)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "train":
            i += 1
            train(a.train_seconds)
            hold(i)
        elif cmd == "spike":
            torch.cuda.synchronize()
            big = torch.empty(4 * GIB, dtype=torch.uint8, device=dev)
            big.fill_(1)
            torch.cuda.synchronize()
            time.sleep(0.005)
            del big
            torch.cuda.empty_cache()  # back to the driver: NVML's used drops again
            mid = torch.empty(GIB, dtype=torch.uint8, device=dev)
            mid.fill_(1)
            torch.cuda.synchronize()
            time.sleep(0.05)  # five of the agent's 100 Hz ticks
            del mid
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
            say(spiked=True)
        elif cmd == "quit":
            break
    return 0


# ---------------------------------------------------------------- the check

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """The endpoint's samples: (name, labels, value)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = []
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = LINE.match(ln)
        if m:
            labels = {k: v.encode().decode("unicode_escape") for k, v in LABEL.findall(m.group(2) or "")}
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def series(samples, name: str, **want) -> list[tuple[dict[str, str], float]]:
    return [(l, v) for n, l, v in samples if n == name and all(l.get(k) == w for k, w in want.items())]


def spikes(url: str, before, lab: dict[str, str], pid: str, base_alloc: int, make, problems: list[str]):
    """Make the child's spikes right after the scrape `before` and check a
    scrape within the window has them, a second one right after it too, and
    one after the window neither; returns (NVML used max, torch allocated
    max) of the first scrape that has them."""
    gpu = lab.get("gpu")
    base_used = max((v for l, v in series(before, "gputop_nvml_used_bytes") if l.get("gpu") == gpu), default=0)
    make()
    made = time.monotonic()

    def maxes(samples):
        mx = [v for l, v in series(samples, "gputop_nvml_used_max_bytes") if l.get("gpu") == gpu]
        am = [v for _, v in series(samples, "gputop_torch_allocated_max_bytes", pid=pid)]
        return (mx[0] if mx else 0.0), (am[0] if am else 0.0)

    def both(mx, am):
        return mx >= base_used + 3.5 * GIB and am >= base_alloc + GIB

    # Samples reach gputop in batches (NVML's every 40 ms, the agent's as it
    # flushes): scrape until both show, within the window.
    mx = am = 0.0
    while time.monotonic() < made + WINDOW - 0.5:
        time.sleep(0.2)
        m1, a1 = maxes(scrape(url))
        mx, am = max(mx, m1), max(am, a1)
        if both(m1, a1):
            # a second scraper right after: the same spikes
            m2, a2 = maxes(scrape(url))
            if not both(m2, a2):
                problems.append(f"a second scrape in the window lost a spike: NVML used max {m2:.0f}, "
                                f"torch allocated max {a2:.0f}")
            break
    if mx < base_used + 3.5 * GIB:
        problems.append(f"NVML: used max over the window {mx:.0f} < used {base_used:.0f} + 3.5 GiB")
    if am < base_alloc + GIB:
        problems.append(f"torch: allocated max over the window {am:.0f} < {base_alloc} + 1 GiB")
    time.sleep(max(0.0, made + WINDOW + 1.0 - time.monotonic()))
    mx3, am3 = maxes(scrape(url))
    if mx3 >= base_used + 3.5 * GIB or am3 >= base_alloc + GIB:
        problems.append(f"a scrape after the window still shows a spike: NVML used max {mx3:.0f}, "
                        f"torch allocated max {am3:.0f}")
    return mx, am


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gputop", default=os.path.join(REPO, "bin", "gputop"))
    ap.add_argument("--results-dir")
    ap.add_argument("--name", default="80-metrics")
    ap.add_argument("--workdir")
    ap.add_argument("--holds", type=int, default=4, help="times the child holds still to be compared")
    ap.add_argument("--train-seconds", type=float, default=3.0, help="training between two holds")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds a hold may take to reach the endpoint before it counts as a mismatch")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    a = ap.parse_args(argv)
    if a.child:
        return child(a)
    if a.dry_run:
        print(f"metrics_check.py: gputop {a.gputop}: {'ok' if os.access(a.gputop, os.X_OK) else 'missing'}; "
              f"{a.holds} holds, {a.train_seconds:g} s of training each")
        print("metrics_check.py: dry run ok")
        return 0
    exact, spike = a.name + "-exact", a.name + "-spike"
    if not os.access(a.gputop, os.X_OK):
        for n in (exact, spike):
            write_result(a.results_dir, n, "FAIL", f"{a.gputop} not found")
        return 1
    work = a.workdir or tempfile.mkdtemp(prefix="gputop-metrics-")
    os.makedirs(work, exist_ok=True)
    sock = os.path.join(work, "metrics.sock")
    addr = f"127.0.0.1:{free_port()}"
    url = f"http://{addr}/metrics"
    log = open(os.path.join(work, "metrics-serve.log"), "w")
    srv = subprocess.Popen([a.gputop, "serve", "--source", "all", "--socket", sock, "--metrics", addr,
                            "--metrics-window", f"{WINDOW:g}s"],
                           stdout=log, stderr=subprocess.STDOUT)
    kid = None
    problems: list[str] = []
    spike_problems: list[str] = []
    compared = 0
    spike_seen = None
    notes: set[str] = set()
    try:
        for _ in range(100):
            if os.path.exists(sock) or srv.poll() is not None:
                break
            time.sleep(0.05)
        if srv.poll() is not None:
            raise RuntimeError(f"gputop serve exited with {srv.returncode} (see {log.name})")
        env = dict(os.environ, GPUTOP_SOCKET=sock, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                   TORCHELASTIC_RUN_ID=JOB_ID, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.path.join(REPO, "agent") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        kid = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                                "--train-seconds", str(a.train_seconds), "--batch", str(a.batch)],
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        host = socket.gethostname()

        def read() -> dict:
            line = kid.stdout.readline()
            if not line:
                raise RuntimeError(f"the training child ended (exit {kid.wait()})")
            print("child:", line.strip())
            return json.loads(line)

        def command(c: str) -> None:
            kid.stdin.write(c + "\n")
            kid.stdin.flush()

        for i in range(a.holds):
            h = read()
            pid = str(h["pid"])
            want = {name: h["stats"][key] for name, key in TORCH_KEYS.items()}
            got: dict[str, object] = {}
            deadline = time.monotonic() + a.settle
            while True:
                samples = scrape(url)
                got = {}
                for name in want:
                    s = series(samples, name, pid=pid)
                    got[name] = int(s[0][1]) if len(s) == 1 else f"{len(s)} series"
                if got == want or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            compared += 1
            for name in want:
                if got[name] != want[name]:
                    problems.append(f"hold {i}: {name} = {got[name]}, torch says {want[name]}")
            # labels: the place torchrun gave, and the GPU series they join
            s = series(samples, "gputop_torch_allocated_bytes", pid=pid)
            if len(s) == 1:
                lab = s[0][0]
                for k, w in (("rank", "0"), ("local_rank", "0"), ("job_id", JOB_ID), ("Hostname", host),
                             ("modelName", h["name"])):
                    if lab.get(k) != w:
                        problems.append(f"hold {i}: label {k}={lab.get(k)!r}, want {w!r}")
                gpu = series(samples, "gputop_nvml_used_bytes", UUID=lab.get("UUID", "?"), gpu=lab.get("gpu", "?"))
                if len(gpu) != 1:
                    problems.append(f"hold {i}: no gputop_nvml_used_bytes with the process's gpu and UUID "
                                    f"({lab.get('gpu')}, {lab.get('UUID')})")
                if not series(samples, "gputop_process_nvml_used_bytes", pid=pid):
                    # NVML's process list may hold no pids in a container: said, not failed
                    notes.add(f"no gputop_process_nvml_used_bytes for pid {pid} (NVML's process list)")
            if i == 1 and len(s) == 1:
                # this scrape began the interval; the spikes fall inside it
                spike_seen = spikes(url, samples, s[0][0], pid, want["gputop_torch_allocated_bytes"],
                                    lambda: (command("spike"), read()), spike_problems)
            command("train" if i + 1 < a.holds else "quit")
    except Exception as e:  # noqa: BLE001 (what broke goes into the result)
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if kid is not None:
            try:
                kid.stdin.close()
            except OSError:
                pass
            try:
                kid.wait(30)
            except subprocess.TimeoutExpired:
                kid.kill()
        stop_proc(srv)
        log.close()
    ok = not problems and compared == a.holds
    write_result(a.results_dir, exact, "PASS" if ok else "FAIL",
                 f"{compared} holds: every allocator series equal to torch's own, labels right"
                 + "".join(f"; {n}" for n in sorted(notes)) if ok
                 else "; ".join(problems[:4]) + (f" (+{len(problems) - 4} more)" if len(problems) > 4 else ""),
                 problems=problems, notes=sorted(notes), holds=compared)
    if a.holds < 2:
        write_result(a.results_dir, spike, "SKIP", "needs --holds 2 or more")
    else:
        sp = spike_seen
        sok = not spike_problems and sp is not None
        write_result(a.results_dir, spike, "PASS" if sok else "FAIL",
                     f"4 GiB for 5 ms: NVML used max {sp[0] / GIB:.2f} GiB; 1 GiB for 50 ms: torch allocated max "
                     f"{sp[1] / GIB:.2f} GiB; both in two scrapes of the {WINDOW:g} s window, gone after it" if sok
                     else "; ".join(spike_problems) or "the spike was not made (see the exact result)",
                     problems=spike_problems)
    return 0 if ok and not spike_problems else 1


if __name__ == "__main__":
    sys.exit(main())
