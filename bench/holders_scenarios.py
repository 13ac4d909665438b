#!/usr/bin/env python3
"""The reference article's memory-leak scenarios, diagnosed by gputop.holders()
on a real GPU, plus the holders() cost benchmark.

    PYTHONPATH=agent python3 bench/holders_scenarios.py --out holders.json
    GPUTOP_HOLDERS_DEVICE=cpu ... holders_scenarios.py --dry-run      # CPU tensors

Scenarios (the article's code, as a user writes it; their cells, culprits
and fixes are leak_scenarios.py's):
  a  model and optimizer never deleted after training
  b  model1, then model2, created and trained in a row
  c  a `losses` list of loss tensors that still carry grad_fn (validation
     without torch.no_grad())
  d  inference without torch.no_grad(): the output keeps its graph
  e  ref = model; del model
  f  an exception raised mid-training; sys.last_traceback keeps its frames

Each runs twice: in a fresh Python process of its own (a script: top-level
code in __main__, the failing call run as `python -i` would, so
sys.last_traceback is set), and all six in sequence in ONE real IPython
kernel driven through jupyter_client (`%load_ext gputop`, cells with history,
so Out[N] exists; the failing cell raises and IPython keeps its traceback).

For each: the allocator's allocated bytes are the baseline before the
scenario (after a warm-up that creates the cuBLAS workspaces, which stay
allocated for the life of the process); after it, holders() (%gpuholders in
the kernel) must name the culprit first with a fix in its hint. Then the
table is followed as a user would: the largest holder's hint is applied
(`del optimizer`, `losses = [t.item() for t in losses]`, `out = out.detach()`,
%gpucleanup...), holders() runs again, until nothing the scenario made is
held; then gputop.cleanup() (%gpucleanup in the kernel). PASS needs the
right top holder, its hint naming the fix, and allocated equal to the
baseline to the byte.

--verdict (fresh processes only) checks gputop's verdict instead of a
baseline: no warm-up (the "Training start" row is taken before any matmul),
and three end rows whose attribution (gputop.snapshot(..., end=True)["held"])
must say what a user needs: "Training end" right after the scenario must
name the culprit as holding memory; "After the fix", once the hints were
followed (gc.collect and empty_cache, the workspaces left), must find
nothing of the user's and nothing unaccounted; gputop.cleanup()'s "After
cleanup" must find nothing at all allocated. With GPUTOP_SOCKET set, the
rows also reach a running gputop, whose own verdicts a checker can read.

With --dry-run, --verdict only runs the code (CPU tensors have no caching
allocator to attribute).

--dry-run runs the same logic on CPU tensors (GPUTOP_HOLDERS_DEVICE=cpu,
small sizes; "allocated" is then malloc's in-use bytes, compared within
2 MiB). The table is printed last; --out FILE writes everything as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
AGENT = os.path.join(ROOT, "agent")
MIB = 1 << 20
CPU_TOLERANCE = 2 * MIB  # malloc's in-use bytes are not an exact allocator count
MAX_ROUNDS = 12
UNEXPLAINED = "no Python reference"  # holders()' group for bytes no tensor explains

sys.path.insert(0, HERE)
from leak_scenarios import (BY_KEY, PRELUDE, SIZES, WARMUP, Scenario,  # noqa: E402
                            actionable, fix_for)


# ---- executors: where cells run ----

class FreshExec:
    """Cells run as one script's top-level code in this process's __main__,
    through code.InteractiveInterpreter, so a failing call sets sys.last_*
    as `python -i` does."""

    def __init__(self) -> None:
        import code
        import types

        self._orig_main = sys.modules["__main__"]
        mod = types.ModuleType("__main__")
        mod.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = mod
        self.ns = mod.__dict__
        self.interp = code.InteractiveInterpreter(self.ns)
        self.n = 0

    def run(self, src: str, store_history: bool = True) -> dict:
        import contextlib
        import io

        self.n += 1
        err: list[str] = []
        buf = io.StringIO()
        real_write = self.interp.write

        def write(s: str) -> None:
            err.append(s)
            real_write(s)

        self.interp.write = write  # type: ignore[method-assign]
        try:
            code = compile(src, f"<cell {self.n}>", "exec")
            with contextlib.redirect_stdout(buf):
                self.interp.runcode(code)
        finally:
            self.interp.write = real_write  # type: ignore[method-assign]
        out = buf.getvalue()
        sys.stdout.write(out)
        last = "".join(err).strip().splitlines()
        return {"ok": not err, "stdout": out, "error": last[-1] if last else None}

    def state(self) -> dict:
        return self.ns["_hs_state"]()


class KernelExec:
    """Cells run in a real IPython kernel (ipykernel) through jupyter_client,
    started with this interpreter and environment."""

    def __init__(self, env: dict[str, str], timeout: float) -> None:
        from jupyter_client import KernelManager

        self.timeout = timeout
        self.tmp = tempfile.mkdtemp(prefix="hs-kernel-")
        spec = os.path.join(self.tmp, "share", "kernels", "gputop-bench")
        os.makedirs(spec)
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                "{connection_file}"],
                       "display_name": "gputop bench", "language": "python"}, f)
        # a private Jupyter/IPython home: no user config, profile or startup file
        dirs = {"JUPYTER_PATH": os.path.join(self.tmp, "share"),
                "JUPYTER_RUNTIME_DIR": os.path.join(self.tmp, "runtime"),
                "JUPYTER_CONFIG_DIR": os.path.join(self.tmp, "config"),
                "JUPYTER_DATA_DIR": os.path.join(self.tmp, "data"),
                "IPYTHONDIR": os.path.join(self.tmp, "ipython")}
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        os.environ.update(dirs)
        kenv = dict(env)
        kenv.update(dirs)
        # ipc sockets in the private directory: no TCP port, nothing to encrypt
        self.km = KernelManager(kernel_name="gputop-bench", transport="ipc",
                                ip=os.path.join(self.tmp, "kernel-ipc"))
        self.km.start_kernel(env=kenv, cwd=ROOT)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=timeout)
        self.log: list[dict] = []

    def run(self, src: str, store_history: bool = True) -> dict:
        out: list[str] = []
        errs: list[str] = []
        res: list[str] = []

        def hook(msg: dict) -> None:
            t = msg["msg_type"]
            c = msg["content"]
            if t == "stream":
                out.append(c.get("text", ""))
            elif t == "execute_result":
                res.append(c.get("data", {}).get("text/plain", ""))
            elif t == "error":
                errs.append(f"{c.get('ename')}: {c.get('evalue')}")

        reply = self.kc.execute_interactive(src, store_history=store_history,
                                            output_hook=hook, timeout=self.timeout)
        content = reply.get("content", {})
        stdout = "".join(out)
        if store_history:
            n = content.get("execution_count")
            lines = src.rstrip().splitlines()
            if len(lines) > 20:  # the prelude: its definitions are in this file
                lines = lines[:3] + [f"... ({len(lines) - 3} more lines)"]
            print(f"In [{n}]: " + "\n   ...: ".join(lines))
            if stdout:
                print(stdout.rstrip())
            for r in res:
                print(f"Out[{n}]: {r[:300]}")
            for e in errs:
                print(f"  raised {e}")
        ok = content.get("status") == "ok"
        err = errs[-1] if errs else None
        if err is None and not ok:
            err = f"{content.get('ename')}: {content.get('evalue')}"
        if not store_history and res:
            raise RuntimeError(f"a harness cell had a value, which would shift _: {src!r}")
        return {"ok": ok, "stdout": stdout, "error": err, "result": res[-1] if res else None,
                "execution_count": content.get("execution_count")}

    def state(self) -> dict:
        r = self.run("_hs_emit()", store_history=False)
        for line in r["stdout"].splitlines():
            if line.startswith("HS_STATE "):
                return json.loads(line[len("HS_STATE "):])
        raise RuntimeError(f"no state from the kernel: {r}")

    def close(self) -> None:
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- one scenario, either executor ----

def setup(ex: Any, mode: str, verdict: bool = False) -> dict:
    for src in (PRELUDE, "%load_ext gputop" if mode == "kernel" else None,
                "_hs_start()" if verdict else WARMUP):
        if src is None:
            continue
        r = ex.run(src, store_history=mode == "kernel")
        if not r["ok"]:
            raise RuntimeError(f"setup cell failed: {r['error']}")
    return ex.state()


def drive(ex: Any, sc: Scenario, mode: str, warm: dict, cfg: dict) -> dict:
    r: dict[str, Any] = {"scenario": sc.key, "title": sc.title, "mode": mode,
                         "device": cfg["device"], "warm_baseline": warm["allocated"]}
    st0 = ex.state()
    base = {(g["kind"], g["name"]): g["bytes"] for g in st0["groups"]}
    r["baseline"] = st0["allocated"]
    r["baseline_reserved"] = st0["reserved"]
    r["baseline_groups"] = st0["groups"]
    cells = []
    for src in sc.sources(mode):
        c = ex.run(src)
        cells.append({"source": src, "ok": c["ok"], "error": c["error"]})
    r["cells"] = cells
    raised = [c for c in cells if not c["ok"]]
    r["raised_as_expected"] = bool(raised) == sc.raises
    verdict = bool(cfg.get("verdict"))
    if verdict:
        r["held_end"] = _held_of(ex.run('_hs_end("Training end")'))
    st1 = ex.state()
    r["allocated_after"] = st1["allocated"]
    r["reserved_after"] = st1["reserved"]
    r["holders_ms"] = st1["took_ms"]
    r["holders_skipped"] = st1["skipped"]
    r["holders_error"] = st1["error"]
    r["groups"] = st1["groups"][:10]
    if mode == "kernel":
        t = ex.run("%gpuholders --top 8")
        r["gpuholders_table"] = t["stdout"]
    act = actionable(st1["groups"], base)
    top = act[0] if act else None
    r["top"] = top
    r["culprit_expected"] = sc.culprit_desc
    r["culprit_ok"] = bool(top) and sc.culprit(top)
    r["hint_ok"] = bool(top) and re.search(sc.hint_re[mode], top.get("hint") or "") is not None
    if mode == "kernel" and top is not None:
        # the magic's table must lead with the same holder
        lines = [ln for ln in r.get("gpuholders_table", "").splitlines()[2:]
                 if ln.strip() and not ln.strip().startswith("->")]
        r["magic_top_ok"] = any(top["name"] in ln for ln in lines[:2])
    # follow the table: apply the largest holder's fix, look again
    rounds: list[dict] = []
    st = st1
    tried: set[tuple[str, str]] = set()
    for _ in range(MAX_ROUNDS):
        g, fix = None, None
        for cand in actionable(st["groups"], base):
            f = fix_for(cand, mode)
            if f is not None and (cand["name"], f) not in tried:
                g, fix = cand, f
                break
        if g is None:
            break
        rounds.append({"holder": g["name"], "kind": g["kind"], "bytes": g["bytes"],
                       "hint": g.get("hint", ""), "fix": fix})
        tried.add((g["name"], fix))
        c = ex.run(fix)
        rounds[-1]["error"] = c["error"]
        st = ex.state()
    r["rounds"] = rounds
    # what the table still shows that no hint removed; the allocator's
    # rounding can leave "no Python reference" a little above its baseline
    # while tensors live, which the final comparison settles
    left = actionable(st["groups"], base)
    r["left"] = [g for g in left if g["name"] != UNEXPLAINED]
    r["unexplained_growth"] = sum(g["bytes"] - base.get((g["kind"], g["name"]), 0)
                                  for g in left if g["name"] == UNEXPLAINED)
    if verdict:
        # the user's own cleanup after the fixes: the workspaces stay
        ex.run("gc.collect()\nif DEV == 'cuda':\n    torch.cuda.empty_cache()\n")
        r["held_fixed"] = _held_of(ex.run('_hs_end("After the fix")'))
    final = "%gpucleanup" if mode == "kernel" else ("_hs_cleanup()" if verdict else "gputop.cleanup()")
    c = ex.run(final)
    r["cleanup_error"] = c["error"]
    if verdict:
        r["held_cleanup"] = _held_of(c)
    stf = ex.state()
    r["final_allocated"] = stf["allocated"]
    r["final_reserved"] = stf["reserved"]
    r["delta"] = stf["allocated"] - r["baseline"]
    if cfg["device"] == "cuda":
        r["back_to_baseline"] = r["delta"] == 0
    else:
        r["back_to_baseline"] = abs(r["delta"]) <= CPU_TOLERANCE
    r["pass"] = bool(r["culprit_ok"] and r["hint_ok"] and r["back_to_baseline"]
                     and r["raised_as_expected"] and not r["left"]
                     and r.get("magic_top_ok", True))
    if verdict:
        end, fixed, final_h = r["held_end"], r["held_fixed"], r["held_cleanup"]
        top_end = (end.get("top") or [None])[0]
        r["verdict_end_ok"] = bool(not end.get("skipped") and end.get("python", 0) > 0
                                   and top_end is not None and sc.culprit(top_end))
        r["verdict_fixed_ok"] = bool(not fixed.get("skipped") and fixed.get("python") == 0
                                     and fixed.get("unaccounted") == 0)
        r["verdict_cleanup_ok"] = bool(not final_h.get("skipped") and final_h.get("allocated") == 0)
        if cfg["device"] == "cuda":
            r["pass"] = bool(r["pass"] and r["verdict_end_ok"] and r["verdict_fixed_ok"]
                             and r["verdict_cleanup_ok"])
        else:
            # CPU tensors have no caching allocator to attribute, and without
            # the warm-up malloc's count is no baseline: the dry run only
            # runs the code and the holders checks
            r["pass"] = bool(r["culprit_ok"] and r["hint_ok"] and r["raised_as_expected"])
    return r


def _held_of(cell: dict) -> dict:
    """The attribution a cell printed (_hs_end / _hs_cleanup) of the first device."""
    for line in cell.get("stdout", "").splitlines():
        if line.startswith("HS_HELD "):
            held = json.loads(line[len("HS_HELD "):])
            for v in held.values():
                return v or {"skipped": "no attribution"}
    return {"skipped": f"no attribution printed ({cell.get('error')})"}


# ---- modes ----

def child(key: str) -> int:
    """One scenario in this fresh process; the result is the last line."""
    sc = BY_KEY[key]
    t0 = time.perf_counter()
    try:
        ex = FreshExec()
        cfg = json.loads(os.environ["HS_CONFIG"])
        warm = setup(ex, "fresh", bool(cfg.get("verdict")))
        r = drive(ex, sc, "fresh", warm, cfg)
    except Exception as e:
        r = {"scenario": key, "title": sc.title, "mode": "fresh", "pass": False,
             "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    r["wall_s"] = round(time.perf_counter() - t0, 2)
    r["pid"] = os.getpid()  # whose rows a running gputop has
    sys.stdout.flush()
    print("HS_RESULT " + json.dumps(r), flush=True)
    return 0


def run_fresh(keys: list[str], env: dict[str, str], jobs: int, timeout: float) -> list[dict]:
    def one(key: str) -> dict:
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", key],
                               env=env, cwd=ROOT, capture_output=True, text=True,
                               timeout=timeout, check=False)
            lines = p.stdout.splitlines()
            res = next((json.loads(ln[len("HS_RESULT "):]) for ln in reversed(lines)
                        if ln.startswith("HS_RESULT ")), None)
            if res is None:
                res = {"scenario": key, "title": BY_KEY[key].title, "mode": "fresh",
                       "pass": False, "error": f"child exited {p.returncode} without a result"}
            log = "\n".join(ln for ln in (p.stdout + p.stderr).splitlines()
                            if not ln.startswith("HS_RESULT "))
            res["log"] = log[-6000:]
        except subprocess.TimeoutExpired as e:
            res = {"scenario": key, "title": BY_KEY[key].title, "mode": "fresh", "pass": False,
                   "error": f"timed out after {timeout:g} s",
                   "log": str(e.stdout or "")[-4000:]}
        res["process_wall_s"] = round(time.perf_counter() - t0, 2)
        return res

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        out = list(pool.map(one, keys))
    for r in out:
        print(f"--- fresh process, scenario {r['scenario']} ---")
        print(r.get("log", "").rstrip())
    return out


def run_kernel(keys: list[str], env: dict[str, str], timeout: float) -> tuple[list[dict], dict]:
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        ex = KernelExec(env, timeout)
    except Exception as e:
        info["error"] = f"kernel did not start: {type(e).__name__}: {e}"
        return [{"scenario": k, "title": BY_KEY[k].title, "mode": "kernel", "pass": False,
                 "error": info["error"]} for k in keys], info
    out = []
    try:
        warm = setup(ex, "kernel")
        v = ex.run("import IPython, ipykernel\nprint(sys.version.split()[0], IPython.__version__, "
                   "ipykernel.__version__, torch.__version__, sys.executable)",
                   store_history=False)
        info["versions"] = v["stdout"].strip()
        info["warm_baseline"] = warm["allocated"]
        for k in keys:
            print(f"--- kernel, scenario {k}: {BY_KEY[k].title} ---")
            t1 = time.perf_counter()
            try:
                r = drive(ex, BY_KEY[k], "kernel", warm, json.loads(env["HS_CONFIG"]))
            except Exception as e:
                r = {"scenario": k, "title": BY_KEY[k].title, "mode": "kernel", "pass": False,
                     "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            r["wall_s"] = round(time.perf_counter() - t1, 2)
            out.append(r)
    finally:
        ex.close()
    info["wall_s"] = round(time.perf_counter() - t0, 2)
    return out, info


def run_cost(env: dict[str, str], device: str, timeout: float) -> dict:
    bench = os.path.join(HERE, "holders_bench.py")
    if not os.path.exists(bench):
        return {"error": "bench/holders_bench.py is missing"}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        p = subprocess.run([sys.executable, bench, "--device", device, "--json", path],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           check=False)
        print("--- cost: bench/holders_bench.py ---")
        print((p.stdout + p.stderr).rstrip()[-4000:])
        try:
            with open(path) as f:
                return json.load(f)
        except Exception:
            return {"error": f"holders_bench.py exited {p.returncode} without results"}
    except subprocess.TimeoutExpired:
        return {"error": f"holders_bench.py timed out after {timeout:g} s"}
    finally:
        os.unlink(path)


# ---- output ----

def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / MIB:.1f}"


def table(results: list[dict], cost: dict | None, dry: bool) -> str:
    rows = []
    for r in results:
        top = r.get("top") or {}
        if r.get("error"):
            verdict, back, alloc = "FAIL", "-", "-"
        else:
            verdict = "PASS" if r.get("pass") else "FAIL"
            d = r.get("delta") or 0
            back = ("yes" if r.get("back_to_baseline") else "NO") + f" ({d:+d} B)"
            alloc = (f"{_mib(r.get('baseline'))} / {_mib(r.get('allocated_after'))} / "
                     f"{_mib(r.get('final_allocated'))}")
        why = []
        if not r.get("error") and not r.get("pass"):
            for key, what in (("culprit_ok", f"top is not {r.get('culprit_expected')}"),
                              ("hint_ok", "hint lacks the fix"),
                              ("raised_as_expected", "cell raised unexpectedly"),
                              ("magic_top_ok", "%gpuholders leads with another holder")):
                if r.get(key) is False:
                    why.append(what)
            if r.get("left"):
                why.append("left: " + ", ".join(g["name"] for g in r["left"]))
            for key, what in (("verdict_end_ok", "Training end does not name the culprit"),
                              ("verdict_fixed_ok", "After the fix still finds memory held"),
                              ("verdict_cleanup_ok", "After cleanup is not empty")):
                if r.get(key) is False:
                    why.append(what)
        rows.append([f"{r['scenario']} {r.get('title', '')}", r["mode"],
                     (top.get("name") or r.get("error") or "-")[:60],
                     _mib(top.get("bytes")), alloc, back, verdict,
                     top.get("hint", ""), "; ".join(why)])
    hdr = ["SCENARIO", "MODE", "TOP HOLDER", "MiB", "ALLOCATED MiB base/after/fixed",
           "AFTER FIX == BASELINE", "RESULT"]
    n = len(hdr)
    w = [max([len(hdr[i])] + [len(row[i]) for row in rows]) for i in range(n)]
    fmt = "  ".join(f"{{:<{x}}}" for x in w)
    lines = ["holders scenarios" + (" (DRY RUN: CPU tensors; allocated is malloc's in-use bytes, "
                                    f"compared within {CPU_TOLERANCE // MIB} MiB)" if dry else
                                    " (CUDA; allocated compared to the byte)"),
             fmt.format(*hdr)]
    for row in rows:
        lines.append(fmt.format(*row[:n]).rstrip())
        if row[n]:
            lines.append(f"    hint: {row[n]}")
        if row[n + 1]:
            lines.append(f"    failed: {row[n + 1]}")
    n_pass = sum(1 for r in results if r.get("pass"))
    last = f"{n_pass}/{len(results)} scenario runs passed"
    if cost is not None:
        if cost.get("error"):
            lines.append(f"cost: {cost['error']}  FAIL")
            last += "; cost: not measured"
        else:
            ok = "PASS" if cost.get("ok") else "FAIL"
            lines.append(
                f"cost: holders() with {cost.get('gc_objects')} gc objects, "
                f"{cost.get('device_tensors')} {cost.get('device')} tensors: median "
                f"{cost.get('median_ms')} ms (min {cost.get('min_ms')}, max {cost.get('max_ms')}), "
                f"target {cost.get('target_ms')} ms  {ok}")
            last += f"; holders() cost median {cost.get('median_ms')} ms ({ok})"
    lines.append(last)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU tensors and small sizes (GPUTOP_HOLDERS_DEVICE=cpu)")
    ap.add_argument("--scenarios", default="abcdef", help="which scenarios (default abcdef)")
    ap.add_argument("--modes", default="fresh,kernel", help="fresh, kernel or both")
    ap.add_argument("--jobs", type=int, default=6, help="fresh processes at once")
    ap.add_argument("--no-cost", action="store_true", help="skip the holders() cost benchmark")
    ap.add_argument("--verdict", action="store_true",
                    help="check the end rows' attribution, baseline before any matmul (fresh only)")
    ap.add_argument("--timeout", type=float, default=240.0, help="per process / per cell, s")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child:
        sys.path.insert(0, AGENT)
        return child(a.child)

    keys = [k for k in a.scenarios if k in BY_KEY]
    bad = [k for k in a.scenarios if k not in BY_KEY and k != ","]
    if bad or not keys:
        ap.error(f"--scenarios: unknown {''.join(bad) or '(none)'}; choose from abcdef")
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if any(m not in ("fresh", "kernel") for m in modes):
        ap.error("--modes: fresh, kernel or fresh,kernel")
    device = "cpu" if a.dry_run else "cuda"
    if not a.out and os.environ.get("GPUTOP_CHECK_DIR"):  # scripts/gpu-check.sh
        a.out = os.path.join(os.environ["GPUTOP_CHECK_DIR"], "holders_scenarios.json")

    env = dict(os.environ)
    # absolute paths: the children and the kernel may run elsewhere
    pp = [AGENT] + [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(pp))
    env["PYTHONUNBUFFERED"] = "1"
    if a.verdict:
        modes = [m for m in modes if m == "fresh"] or ["fresh"]
    env["HS_CONFIG"] = json.dumps({"device": device, "verdict": a.verdict, **SIZES[device]})
    if a.dry_run:
        env["GPUTOP_HOLDERS_DEVICE"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("GPUTOP_HOLDERS_DEVICE", None)

    t0 = time.perf_counter()
    results: list[dict] = []
    kinfo: dict = {}
    if "fresh" in modes:
        results += run_fresh(keys, env, a.jobs, a.timeout)
    if "kernel" in modes:
        kr, kinfo = run_kernel(keys, env, a.timeout)
        results += kr
    cost = None if a.no_cost else run_cost(env, device, a.timeout)
    wall = round(time.perf_counter() - t0, 1)
    ok = all(r.get("pass") for r in results) and (cost is None or bool(cost.get("ok")))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": device, "dry_run": a.dry_run, "python": sys.version.split()[0],
                       "executable": sys.executable, "sizes": SIZES[device], "wall_s": wall,
                       "kernel": kinfo, "results": results, "cost": cost, "ok": ok}, f, indent=1)
    print()
    print(f"(total {wall} s)")
    print(table(results, cost, a.dry_run))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
