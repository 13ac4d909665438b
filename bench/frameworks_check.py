#!/usr/bin/env python3
"""JAX and CuPy beside torch on a real GPU: every row's framework figures
against the framework's own, read in the program at the same moment, to
the byte; `gputop run` on a JAX program with no gputop in it; the agent's
overhead on a JAX training loop.

    python3 bench/frameworks_check.py --gputop bin/gputop [--results-dir DIR] [--workdir DIR] [--only ...]
    python3 bench/frameworks_check.py --dry-run     (no GPU: agent/tests' fake jax, cupy and GPU)

Checks (results 39-frameworks-*):
  jax          workloads/jax_train.py (flax MLP, optax Adam, jit) under
               `gputop record`, XLA's default preallocation: each row's jax
               figures (the CSV's framework cell) equal Device.memory_stats()
               read just before and just after the row (which must agree),
               every key gputop sends, to the byte
  noprealloc   the same with XLA_PYTHON_CLIENT_PREALLOCATE=false (the pool
               grows; pool_bytes/bytes_reserved as JAX gives them)
  cupy         workloads/cupy_work.py: each row's cupy figures equal the
               pool's used_bytes, total_bytes, free_bytes, to the byte
  torchcupy    workloads/cupy_work.py --torch: torch's columns equal
               torch.cuda's memory_allocated / memory_reserved /
               max_memory_allocated and the cupy figures the pool's, in the
               same rows, apart
  run          `gputop run --no-tui --csv C -- python workloads/jax_train.py
               --no-agent`: Process start and Process end rows with jax
               figures, no PYTHONPATH to the agent, exit 0
  cleanup      workloads/fw_cleanup.py, JAX then CuPy: gputop.cleanup()'s
               per-framework report against the framework's own figures
               read in the program just before and just after it, to the
               byte (before, after, what it released); JAX: the live arrays
               it counts equal jax.live_arrays() on the device, the kept
               array named and still alive; CuPy: free_all_blocks() gave
               back what total_bytes lost
  overhead     workloads/jax_train.py --abba: seconds per step with the
               agent attached and detached in A B B A blocks, in the
               process; PASS when the median of A is within 0.5% of B's
A check whose framework is not installed is SKIP, saying so.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import start_gputop, stop_proc, work_dir, write_result  # noqa: E402

CHECKS = ("jax", "noprealloc", "cupy", "torchcupy", "run", "cleanup", "overhead")
OVERHEAD_LIMIT = 0.005  # the agent's cost on the JAX loop, at the median
# memory_stats() keys gputop sends (the agent's _jax.MAPPED and EXTRA)
JAX_KEYS = ("bytes_in_use", "pool_bytes", "bytes_reserved", "peak_bytes_in_use", "bytes_limit",
            "peak_pool_bytes", "peak_bytes_reserved", "largest_alloc_size", "num_allocs",
            "largest_free_block_bytes", "bytes_reservable_limit")


def framework_cell(cell: str) -> dict[str, dict[str, int]]:
    """The CSV's framework cell: {framework: {native name: value}}."""
    out: dict[str, dict[str, int]] = {}
    for part in filter(None, (p.strip() for p in cell.split(";"))):
        name, *figs = part.split()
        out[name] = {k: int(v) for k, v in (f.split("=", 1) for f in figs)}
    return out


def witnesses(stdout: str) -> list[dict]:
    return [json.loads(ln[len("WITNESS "):]) for ln in stdout.splitlines() if ln.startswith("WITNESS ")]


def env_for(a: argparse.Namespace, sock: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUTOP", "GPUTOP_SOCKET")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "agent"), env.get("PYTHONPATH", "")]))
    env["GPUTOP_SOCKET"] = sock
    if a.dry_run:
        env["GPUTOP_HOLDERS_DEVICE"] = "cpu"
    env.update(extra)
    return env


def recorded_run(a: argparse.Namespace, work: str, name: str, cmd: list[str], **extra: str) -> tuple[int, str, list[dict]]:
    """cmd under `gputop record`: (its exit code, its stdout, the CSV's rows)."""
    rec, sock, out = (os.path.join(work, f"{name}.{x}") for x in ("gputop", "sock", "csv"))
    log = open(os.path.join(work, f"{name}.log"), "w")
    g = start_gputop(a.gputop, rec, sock, "agent", log)
    if g is None:
        return -1, "", []
    try:
        p = subprocess.run([a.python, *cmd], env=env_for(a, sock, **extra), capture_output=True, text=True,
                           timeout=a.timeout, cwd=ROOT)
        log.write(p.stderr)
    finally:
        stop_proc(g)
    log.write(f"exit {p.returncode}\n")
    e = subprocess.run([a.gputop, "export", rec, "--csv", out], capture_output=True, text=True, timeout=120)
    log.write(e.stdout + e.stderr)
    log.close()
    rows = list(csv.DictReader(open(out, newline=""))) if os.path.exists(out) else []
    return p.returncode, p.stdout, rows


def compare(rows: list[dict], wits: list[dict], fw: str, torch: bool = False) -> tuple[int, list[str]]:
    """Each witness's row: fw's figures equal what the program read, and
    (torch) torch's columns; returns (rows compared, problems)."""
    by_label = {r["label"]: r for r in rows}
    bad: list[str] = []
    n = 0
    for w in wits:
        label, before, after = w["label"], w["before"], w["after"]
        if before != after:
            bad.append(f"{label!r}: the figures moved while the row was read ({before} -> {after}): not compared")
            continue
        r = by_label.get(label)
        if r is None:
            bad.append(f"{label!r}: no row in the CSV")
            continue
        got = framework_cell(r.get("framework", "")).get(fw)
        want = before[fw] if fw in before else before
        if got is None:
            bad.append(f"{label!r}: no {fw} figures in the row ({r.get('framework')!r})")
            continue
        keys = [k for k in (JAX_KEYS if fw == "jax" else ("used_bytes", "total_bytes", "free_bytes")) if k in want]
        diff = {k: (got.get(k), want[k]) for k in keys if got.get(k) != want[k]}
        if diff:
            bad.append(f"{label!r}: {fw} row vs the program's own reading (row, program): {diff}")
        if torch:
            t = before["torch"]
            row_t = {k: int(r[f"{k}_bytes"]) if r.get(f"{k}_bytes") else None for k in ("allocated", "reserved", "peak")}
            if row_t != t:
                bad.append(f"{label!r}: torch's columns {row_t}, torch.cuda says {t}")
        n += 1
    return n, bad


def check_rows(a: argparse.Namespace, work: str, name: str, result: str, cmd: list[str], fw: str,
               torch: bool = False, **extra: str) -> bool:
    rc, out, rows = recorded_run(a, work, name, cmd, **extra)
    wits = witnesses(out)
    if rc != 0 or not wits:
        write_result(a.results_dir, result, "FAIL", f"the workload exited {rc} with {len(wits)} rows ({name}.log)")
        return False
    n, bad = compare(rows, wits, fw, torch)
    print(f"{name}: {n} rows compared; columns of the first: {rows[0].get('framework') if rows else '-'}")
    for b in bad:
        print(f"  {b}")
    what = f"{n} rows, each {fw}'s figures" + (" and torch's" if torch else "") + " equal to the program's own at the row, to the byte"
    ok = not bad and n == len(wits)
    write_result(a.results_dir, result, "PASS" if ok else "FAIL", what if ok else f"{len(bad)} of {len(wits)} rows differ: {bad[0]}",
                 rows=n, problems=bad)
    return ok


def have(a: argparse.Namespace, *mods: str) -> str:
    """"" when a.python imports mods, else what it lacks."""
    if a.dry_run:
        return ""
    p = subprocess.run([a.python, "-c", "import " + ", ".join(mods)], capture_output=True, text=True, timeout=120)
    return "" if p.returncode == 0 else p.stderr.strip().splitlines()[-1]


PROBE = r"""
import json, sys
out = {"python": sys.version.split()[0]}
for name in ("jax", "jaxlib", "flax", "optax", "cupy", "torch"):
    try:
        out[name] = __import__(name).__version__
    except Exception as e:
        out[name] = "missing: %s" % type(e).__name__
try:
    import jax
    from jax._src import xla_bridge as xb
    out["xla_bridge._backends before any use"] = repr(getattr(xb, "_backends", "NO SUCH ATTRIBUTE"))
    d = jax.local_devices()[0]
    out["device"] = "%s %s local_hardware_id=%s" % (d.platform, getattr(d, "device_kind", "?"), getattr(d, "local_hardware_id", "NONE"))
    out["memory_stats keys"] = sorted((d.memory_stats() or {}).keys())
    out["xla_bridge._backends after"] = sorted(getattr(xb, "_backends", {}))
except Exception as e:
    out["jax probe"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


def probe(a: argparse.Namespace) -> None:
    """What this machine's frameworks are, and what of JAX the agent relies
    on (xla_bridge's _backends, local_hardware_id, memory_stats' keys): one
    INFO result, so a failure below can be read against it."""
    p = subprocess.run([a.python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr.strip()[-300:]
    print("probe: " + line)
    write_result(a.results_dir, "39-frameworks-versions", "INFO", line[:400])


def dry(a: argparse.Namespace) -> list[str]:
    return ["--dry-run"] if a.dry_run else []


def check_run(a: argparse.Namespace, work: str) -> bool:
    out = os.path.join(work, "run.csv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUTOP_SOCKET", "GPUTOP")}
    env["GPUTOP_AGENT_PATH"] = os.path.join(ROOT, "agent")
    if a.dry_run:  # the fake jax, imported as the real one is: through gputop run's import hook
        env["PYTHONPATH"] = os.path.join(ROOT, "agent", "tests", "fakemodules")
        env["GPUTOP_HOLDERS_DEVICE"] = "cpu"
    cmd = [a.gputop, "run", "--no-tui", "--source", "agent", "--csv", out, "--",
           a.python, os.path.join(HERE, "workloads", "jax_train.py"), "--no-agent", "--steps", "20", *dry(a)]
    with open(os.path.join(work, "run.log"), "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        p = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=a.timeout, cwd=work)
    rows = {r["label"]: r for r in csv.DictReader(open(out, newline=""))} if os.path.exists(out) else {}
    start, end = rows.get("Process start"), rows.get("Process end")
    ok = (p.returncode == 0 and start is not None and end is not None
          and "jax" in framework_cell(start["framework"]) and "jax" in framework_cell(end["framework"])
          and end.get("verdict") != "")
    summary = (f"exit {p.returncode}; Process start {'with jax figures' if start and 'jax' in start['framework'] else 'missing or without jax'}; "
               f"Process end {end['verdict'] + ', ' + end['framework'][:80] if end else 'missing'}")
    print("run: " + summary)
    write_result(a.results_dir, "39-frameworks-run", "PASS" if ok else "FAIL", summary)
    return ok


def check_cleanup(a: argparse.Namespace, work: str, fw: str) -> bool:
    result = f"39-frameworks-cleanup-{fw}"
    rc, out, _ = recorded_run(a, work, f"cleanup-{fw}", [os.path.join(HERE, "workloads", "fw_cleanup.py"),
                                                           "--framework", fw, *dry(a)])
    line = [ln for ln in out.splitlines() if ln.startswith("CLEANUP ")]
    if rc != 0 or not line:
        write_result(a.results_dir, result, "FAIL", f"the workload exited {rc} without its CLEANUP line (cleanup-{fw}.log)")
        return False
    d = json.loads(line[-1][len("CLEANUP "):])
    rs = [r for r in d["result"] if r.get("framework") == fw and r.get("device") == 0]
    bad: list[str] = []
    if len(rs) != 1:
        bad.append(f"cleanup() reported {len(rs)} entries of {fw} on device 0: {d['result']}")
    else:
        r = rs[0]
        for when in ("before", "after"):
            # the figures the program reads too (not the pinned pool's)
            diff = {k: (v, d[when][k]) for k, v in r[when].items() if k in d[when] and d[when][k] != v}
            if diff:
                bad.append(f"{when}: cleanup()'s figures vs the program's own (cleanup, own): {diff}")
        for fig in ("in_use", "reserved"):
            n = r.get(fig)
            if n and r.get(f"released_{fig}_bytes") != d["before"].get(n, 0) - d["after"].get(n, 0):
                bad.append(f"released_{fig}_bytes {r.get(f'released_{fig}_bytes')}, own {n} fell by "
                           f"{d['before'].get(n, 0) - d['after'].get(n, 0)}")
        if fw == "jax":
            if [r.get("live_arrays"), r.get("live_array_bytes")] != d["live"]:
                bad.append(f"live arrays {r.get('live_arrays')}/{r.get('live_array_bytes')} B, jax.live_arrays() {d['live']}")
            if not r.get("held") or r["held"][0].get("hint") != "del params":
                bad.append(f"the kept array is not named by its variable, params: {r.get('held')}")
    summary = (f"{fw}: " + (r_line(rs[0]) if len(rs) == 1 else "no report") +
               ("" if not bad else f"; {len(bad)} problem(s): {bad[0]}"))
    print("cleanup " + summary)
    write_result(a.results_dir, result, "FAIL" if bad else "PASS", summary, report=d["result"], own=[d["before"], d["after"]],
                 printed=d["printed"], problems=bad)
    return not bad


def r_line(r: dict) -> str:
    """One cleanup() report in a line: what it released and what is left."""
    return (f"released {r.get('released_in_use_bytes')} B in use ({r.get('in_use')}), {r.get('released_reserved_bytes')} B "
            f"held ({r.get('reserved')}); left {r.get('in_use_bytes')} / {r.get('reserved_bytes')} B"
            + (f", {r['live_arrays']} live arrays {r['live_array_bytes']} B" if "live_arrays" in r else "")
            + "; steps " + ", ".join(f"{s['step']} {s.get('released_in_use_bytes', 0)}/{s.get('released_reserved_bytes', 0)}"
                                     for s in r.get("steps", [])))


def check_overhead(a: argparse.Namespace, work: str) -> bool:
    blocks = 4 if a.dry_run else a.abba_blocks
    rc, out, _ = recorded_run(a, work, "overhead", [os.path.join(HERE, "workloads", "jax_train.py"),
                                                     "--abba", str(blocks), "--block-steps", "5" if a.dry_run else "100", *dry(a)])
    line = [ln for ln in out.splitlines() if ln.startswith("ABBA ")]
    if rc != 0 or not line:
        write_result(a.results_dir, "39-frameworks-overhead", "FAIL", f"the workload exited {rc} without its ABBA line (overhead.log)")
        return False
    d = json.loads(line[-1][5:])
    on, off = statistics.median(d["on"]), statistics.median(d["off"])
    cost = on / off - 1 if off > 0 else 0.0
    summary = (f"median {on * 1e3:.3f} ms/step with the agent, {off * 1e3:.3f} without ({cost * 100:+.2f}%; "
               f"limit {OVERHEAD_LIMIT * 100:.1f}%), {len(d['on'])}+{len(d['off'])} blocks")
    print("overhead: " + summary)
    status = "INFO" if a.dry_run else ("PASS" if cost <= OVERHEAD_LIMIT else "FAIL")
    write_result(a.results_dir, "39-frameworks-overhead", status, summary, on=d["on"], off=d["off"])
    return status != "FAIL"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default=os.path.join(ROOT, "bin", "gputop"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--results-dir")
    ap.add_argument("--workdir")
    ap.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--abba-blocks", type=int, default=40)
    ap.add_argument("--dry-run", action="store_true",
                    help="without a GPU: every check over agent/tests' fake jax, cupy and GPU, through the real binary (built when --gputop is not there)")
    a = ap.parse_args()
    a.gputop = os.path.abspath(a.gputop)  # the children run in other directories
    work = work_dir(a, "frameworks")
    if not os.path.exists(a.gputop):
        if not a.dry_run:
            write_result(a.results_dir, "39-frameworks-jax", "FAIL", f"no gputop binary at {a.gputop}")
            return 1
        a.gputop = os.path.join(tempfile.mkdtemp(prefix="gputop-bin."), "gputop")
        go = shutil.which("go") or "/usr/local/go/bin/go"
        subprocess.run([go, "build", "-o", a.gputop, "."], cwd=ROOT, check=True,
                       env=dict(os.environ, CGO_ENABLED="1", CGO_CFLAGS="-Wno-deprecated-declarations"))
    if not a.dry_run:
        probe(a)
    ok = True
    train = [os.path.join(HERE, "workloads", "jax_train.py"), *dry(a)]
    cupy = [os.path.join(HERE, "workloads", "cupy_work.py"), *dry(a)]
    for c in a.only:
        if c in ("jax", "noprealloc", "run", "overhead") and (why := have(a, "jax", "flax", "optax")):
            write_result(a.results_dir, f"39-frameworks-{c}", "SKIP", f"jax, flax and optax are needed: {why}")
            continue
        if c == "cleanup":
            for fw in ("jax", "cupy"):
                if why := have(a, fw):
                    write_result(a.results_dir, f"39-frameworks-cleanup-{fw}", "SKIP", f"needs {fw}: {why}")
                else:
                    ok &= check_cleanup(a, work, fw)
            continue
        if c in ("cupy", "torchcupy") and (why := have(a, "cupy", *(["torch"] if c == "torchcupy" else []))):
            write_result(a.results_dir, f"39-frameworks-{c}", "SKIP", f"needs cupy{' and torch' if c == 'torchcupy' else ''}: {why}")
            continue
        if c == "jax":
            ok &= check_rows(a, work, "jax", "39-frameworks-jax", train, "jax")
        elif c == "noprealloc":
            ok &= check_rows(a, work, "noprealloc", "39-frameworks-jax-noprealloc", train, "jax",
                             XLA_PYTHON_CLIENT_PREALLOCATE="false")
        elif c == "cupy":
            ok &= check_rows(a, work, "cupy", "39-frameworks-cupy", cupy, "cupy")
        elif c == "torchcupy":
            ok &= check_rows(a, work, "torchcupy", "39-frameworks-torch-cupy", [*cupy, "--torch"], "cupy", torch=True)
        elif c == "run":
            ok &= check_run(a, work)
        elif c == "overhead":
            ok &= check_overhead(a, work)
    print(f"frameworks_check.py: {'ok' if ok else 'FAILED'} (logs in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
