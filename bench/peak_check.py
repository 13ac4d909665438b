"""The peak between two rows, broken down, held against what a workload
counted itself.

A deep MLP (--layers Linear+ReLU pairs of --width) is trained with Adam
under `gputop run --record`; a "Step N" row with its ledger comes before
each step, and the steps' batches go up and down (--batches), so that
torch's peak counter rises in some intervals and not in others. A pack
hook (torch.autograd.graph.saved_tensors_hooks) counts the bytes autograd
saves in each step's forward, each storage once, parameters and the input
buffer left out: the activations. bin/peakcheck reads the recording and
gives gputop's interval peaks; they pass when

  exact   an interval is called exact exactly when torch's peak counter
          rose in it (the workload reads the counter at each row), or when
          a sample reached a counter that did not rise;
  rest    in an exact interval, "activations and temporaries at the peak"
          (the peak less the ledger's persistent parts) is within --within
          (1%) of the activations the pack hook counted;
  bound   in an interval that is a bound, the activations lie between its
          least and most.

    python bench/peak_check.py --gputop bin/gputop --peakcheck bin/peakcheck \
        --results-dir R --workdir W        (the GPU machine)
    python bench/peak_check.py --dry-run   (here: the workload on the CPU
                                            and the judge on its figures)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_result  # noqa: E402

NAME = "39-peak"


def child(a: argparse.Namespace) -> dict:
    """The workload: runs in the process gputop run starts (the agent
    injected), or on the CPU for --dry-run."""
    import torch

    dev = "cpu" if a.dry_run else "cuda"
    cuda = dev == "cuda"
    gp = None
    if not a.dry_run:
        import gputop as gp
    torch.manual_seed(0)
    W, L = a.width, a.layers
    layers: list[torch.nn.Module] = []
    for _ in range(L):
        layers += [torch.nn.Linear(W, W), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(W, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5, foreach=False)
    batches = [int(b) for b in a.batches.split(",")]
    xs = torch.randn(max(batches), W, device=dev)  # one input buffer: a persistent tensor
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()} | {xs.untyped_storage().data_ptr()}

    def counter() -> int:
        return torch.cuda.memory_stats().get("allocated_bytes.all.peak", 0) if cuda else 0

    def step(b: int) -> int:
        """One training step on b rows; the bytes saved for backward."""
        seen: dict[int, int] = {}

        def pack(t):
            s = t.untyped_storage()
            if s.data_ptr() not in skip:
                seen[s.data_ptr()] = s.nbytes()
            return t

        opt.zero_grad(set_to_none=False)  # gradients stay: persistent
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(xs[:b]).mean()
        loss.backward()
        opt.step()
        del loss
        return sum(seen.values())

    def row(label: str) -> None:
        if cuda:
            torch.cuda.synchronize()
        if gp is not None:
            gp.snapshot(label)

    step(min(batches))  # gradients and optimizer state exist before the first row
    out: dict = {"pid": os.getpid(), "width": W, "layers": L, "steps": []}
    prev = counter()
    for k, b in enumerate(batches):
        row(f"Step {k}")
        time.sleep(0.05)  # rows apart from the step's samples
        saved = step(b)
        if cuda:
            torch.cuda.synchronize()
        time.sleep(0.05)
        now = counter()
        out["steps"].append({"row": f"Step {k + 1}", "batch": b, "saved": saved, "rose": now > prev,
                             "counter": now})
        prev = now
    row(f"Step {len(batches)}")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh)
    return out


def judge(truth: dict, peaks: list[dict], within: float) -> tuple[list[str], list[str]]:
    """What passed and what failed, a line each, for every step's interval."""
    pid = truth["pid"]
    by = {p["label"]: p for p in peaks if p["pid"] == pid}
    good, bad = [], []
    for s in truth["steps"]:
        p, mib = by.get(s["row"]), s["saved"] / 2**20
        if p is None:
            bad.append(f"{s['row']}: no interval peak from gputop")
            continue
        if p.get("rest_lo") is None:
            bad.append(f"{s['row']}: no ledger to break the peak down ({p['text']})")
            continue
        what = f"{s['row']} (batch {s['batch']}, activations {mib:.1f} MiB)"
        if p["exact"] != (s["rose"] or p["reached"]):
            bad.append(f"{what}: gputop says {'exact' if p['exact'] else 'a bound'}, the counter "
                       f"{'rose' if s['rose'] else 'did not rise'}")
            continue
        if p["exact"]:
            rest = p["rest_lo"]
            off = (rest - s["saved"]) / s["saved"] if s["saved"] else 0.0
            line = f"{what}: exact, activations and temporaries {rest / 2**20:.1f} MiB ({100 * off:+.2f}%)"
            (good if abs(off) <= within else bad).append(line)
            continue
        lo, hi = p["rest_lo"], p["rest_hi"]
        line = (f"{what}: a bound, activations and temporaries {lo / 2**20:.1f} to "
                f"{'?' if hi is None else f'{hi / 2**20:.1f}'} MiB")
        (good if lo <= s["saved"] * (1 + within) and (hi is None or s["saved"] <= hi) else bad).append(line)
    exact = sum(1 for s in truth["steps"] if s["rose"])
    if not 0 < exact < len(truth["steps"]):
        bad.append(f"the batches made the counter rise in {exact} of {len(truth['steps'])} intervals: "
                   "both kinds are needed")
    return good, bad


def dry_run(a: argparse.Namespace) -> int:
    truth = child(a)
    # the judge on peaks made from the workload's own figures: an exact
    # interval at the activations, then one each way wrong
    peaks = []
    for i, s in enumerate(truth["steps"]):
        rose = i % 2 == 0
        s["rose"] = rose
        hi = None if rose else s["saved"] * 2
        peaks.append({"label": s["row"], "pid": truth["pid"], "exact": rose, "reached": False,
                      "rest_lo": s["saved"] if rose else s["saved"] // 2, "rest_hi": hi, "text": ""})
    good, bad = judge(truth, peaks, a.within)
    assert not bad and len(good) == len(truth["steps"]), (good, bad)
    peaks[0]["rest_lo"] = int(truth["steps"][0]["saved"] * 1.05)
    peaks[1]["exact"] = True
    good, bad = judge(truth, peaks, a.within)
    assert len(bad) == 2, bad
    assert all(s["saved"] > 0 for s in truth["steps"]), truth
    print(f"dry run: {len(truth['steps'])} steps on the CPU, saved "
          f"{', '.join(str(s['saved']) for s in truth['steps'])} bytes; the judge catches both faults")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gputop", default="bin/gputop")
    ap.add_argument("--peakcheck", default="bin/peakcheck")
    ap.add_argument("--results-dir")
    ap.add_argument("--workdir", default="/tmp/gputop-peak")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=800)
    ap.add_argument("--batches", default="1024,2048,1024,2048,2560,512",
                    help="each step's batch, in order (the first rows a warm-up at the smallest)")
    ap.add_argument("--within", type=float, default=0.01)
    ap.add_argument("--out", help="child: write the workload's figures here")
    ap.add_argument("--child", action="store_true", help="be the workload (gputop run starts it so)")
    ap.add_argument("--dry-run", action="store_true", help="the workload on the CPU (small) and the judge")
    a = ap.parse_args(argv)
    if a.dry_run:
        a.width, a.layers, a.batches = 32, 4, "8,16,8,16,20,4"
        return dry_run(a)
    if a.child:
        child(a)
        return 0
    os.makedirs(a.workdir, exist_ok=True)
    rec, out = os.path.join(a.workdir, "peak.gputop"), os.path.join(a.workdir, "truth.json")
    for f in (rec, out):
        if os.path.exists(f):
            os.remove(f)
    cmd = [a.gputop, "run", "--no-tui", "--record", rec, "--", sys.executable, os.path.abspath(__file__), "--child",
           "--out", out, "--width", str(a.width), "--layers", str(a.layers), "--batches", a.batches]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(p.stdout[-3000:], p.stderr[-3000:])
    if p.returncode != 0 or not os.path.exists(out):
        write_result(a.results_dir, NAME, "FAIL", f"the workload under gputop run exited with {p.returncode}")
        return 1
    q = subprocess.run([a.peakcheck, rec], capture_output=True, text=True, timeout=120)
    if q.returncode != 0:
        write_result(a.results_dir, NAME, "FAIL", f"peakcheck exited with {q.returncode}: {q.stderr.strip()[:200]}")
        return 1
    peaks = [json.loads(line) for line in q.stdout.splitlines() if line.strip()]
    with open(out) as fh:
        truth = json.load(fh)
    good, bad = judge(truth, peaks, a.within)
    for line in good:
        print("ok   " + line)
    for line in bad:
        print("BAD  " + line)
    n = len(truth["steps"])
    exact = [s for s in truth["steps"] if s["rose"]]
    summary = (f"{a.layers} x Linear({a.width})+ReLU, Adam, {n} intervals ({len(exact)} where torch's peak counter "
               f"rose): " + ("; ".join(bad[:3]) if bad else "; ".join(good[:2]) + "; exactness flag right in all"))
    write_result(a.results_dir, NAME, "FAIL" if bad else "PASS", summary, good=good, bad=bad, peaks=peaks,
                 truth=truth)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
