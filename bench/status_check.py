"""`gputop status --json` on the real driver, held against nvidia-smi and
torch: once with no gputop running (one NVML reading) and once from a
running `gputop record` after the reference training run ended under it.

  nvml   source "nvml"; every GPU nvidia-smi lists, with its total memory
         (nvidia-smi's MiB) and used within 2 MiB of nvidia-smi's reading
         taken just after; no agents or rows, each empty list saying why;
  live   source "gputop"; the training process among the agents; its rows,
         by label, with allocated / reserved / peak equal to torch's own
         counters read around each snapshot call (train_mlp.py --out) to
         the byte; the end rows with a verdict;
  schema both documents valid against docs/status.schema.json (when the
         jsonschema package is there; said so when it is not).

    python bench/status_check.py --nvml N.json --smi SMI.csv --live L.json \
        --torch T.json [--results-dir R]
    python bench/status_check.py --dry-run   (made documents: the checks
                                              pass on right ones, fail on
                                              wrong ones)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_result  # noqa: E402

NAME = "99-status"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def smi_rows(path: str) -> list[dict]:
    """nvidia-smi --query-gpu=index,uuid,memory.total,memory.used --format=csv,noheader,nounits"""
    out = []
    with open(path) as fh:
        for line in fh:
            p = [x.strip() for x in line.split(",")]
            if len(p) == 4 and p[0].isdigit():
                out.append({"index": int(p[0]), "uuid": p[1], "total_mib": int(p[2]), "used_mib": int(p[3])})
    return out


def check_nvml(doc: dict, smi: list[dict]) -> list[str]:
    bad = []
    if doc.get("source") != "nvml":
        bad.append(f"nvml: source {doc.get('source')!r}, want 'nvml'")
    devs = {d.get("uuid"): d for d in doc.get("devices") or []}
    for s in smi:
        d = devs.get(s["uuid"])
        if d is None:
            bad.append(f"nvml: GPU {s['index']} ({s['uuid']}) missing")
            continue
        total, used = d.get("total"), d.get("used")
        if not isinstance(total, int) or total // MIB != s["total_mib"]:
            bad.append(f"nvml: GPU {s['index']} total {total} B, nvidia-smi {s['total_mib']} MiB")
        if not isinstance(used, int) or abs(used / MIB - s["used_mib"]) > 2:
            bad.append(f"nvml: GPU {s['index']} used {used} B, nvidia-smi {s['used_mib']} MiB")
    for k in ("agents", "rows"):
        if doc.get(k) or not doc.get(f"{k}_why"):
            bad.append(f"nvml: {k} {doc.get(k)!r} without a reason ({k}_why {doc.get(f'{k}_why')!r})")
    return bad


def check_live(doc: dict, torch_out: dict) -> tuple[list[str], int]:
    bad, exact = [], 0
    if doc.get("source") != "gputop":
        bad.append(f"live: source {doc.get('source')!r}, want 'gputop'")
    pid = torch_out["pid"]
    if not any(a.get("pid") == pid for a in doc.get("agents") or []):
        bad.append(f"live: the training process {pid} is not among the agents")
    rows = {r.get("label"): r for r in doc.get("rows") or [] if r.get("pid") == pid}
    for want in torch_out["snapshots"]:
        r = rows.get(want["label"])
        if r is None:
            bad.append(f"live: no row {want['label']!r}")
            continue
        for k in ("allocated", "reserved", "peak"):
            if r.get(k) != want[k]:
                bad.append(f"live: {want['label']!r} {k} {r.get(k)}, torch {want[k]}")
                break
        else:
            exact += 1
    ends = [r for r in rows.values() if r.get("end")]
    if not ends or not all(r.get("verdict") for r in ends):
        bad.append(f"live: {len(ends)} end rows, not each with a verdict")
    return bad, exact


def check_schema(docs: list[dict]) -> tuple[list[str], str]:
    try:
        import jsonschema
    except ImportError:
        return [], "schema not checked (no jsonschema package here)"
    with open(os.path.join(REPO, "docs", "status.schema.json")) as fh:
        schema = json.load(fh)
    bad = []
    for d in docs:
        for e in jsonschema.Draft202012Validator(schema).iter_errors(d):
            bad.append(f"schema: {d.get('source')}: {e.message[:150]} at {list(e.path)}")
    return bad, "both valid against docs/status.schema.json" if not bad else "schema errors"


def dry_run() -> int:
    smi = [{"index": 0, "uuid": "GPU-x", "total_mib": 143771, "used_mib": 600}]
    nvml = {"source": "nvml", "devices": [{"uuid": "GPU-x", "total": 143771 * MIB + 5, "used": 600 * MIB}],
            "agents": [], "agents_why": "no gputop is running", "rows": [], "rows_why": "no gputop is running"}
    torch_out = {"pid": 7, "snapshots": [{"label": "Epoch 5", "allocated": 10, "reserved": 20, "peak": 30}]}
    live = {"source": "gputop", "agents": [{"pid": 7}],
            "rows": [{"label": "Epoch 5", "pid": 7, "allocated": 10, "reserved": 20, "peak": 30},
                     {"label": "After cleanup", "pid": 7, "end": True, "verdict": {"status": "released"}}]}
    assert not check_nvml(nvml, smi), check_nvml(nvml, smi)
    bad, exact = check_live(live, torch_out)
    assert not bad and exact == 1, bad
    nvml["devices"][0]["used"] = 700 * MIB
    live["rows"][0]["peak"] = 31
    del live["rows"][1]["verdict"]
    assert len(check_nvml(nvml, smi)) == 1 and len(check_live(live, torch_out)[0]) == 2
    print("dry run: the checks pass on right documents and catch a wrong used figure, a wrong peak "
          "and an end row without a verdict")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nvml", help="gputop status --json with no gputop running")
    ap.add_argument("--smi", help="nvidia-smi --query-gpu=index,uuid,memory.total,memory.used "
                                  "--format=csv,noheader,nounits just after it")
    ap.add_argument("--live", help="gputop status --json --socket S from the running gputop")
    ap.add_argument("--torch", help="train_mlp.py's --out")
    ap.add_argument("--results-dir")
    ap.add_argument("--dry-run", action="store_true", help="the checks on made documents")
    a = ap.parse_args(argv)
    if a.dry_run:
        return dry_run()
    docs, bad = [], []
    for what, path in (("nvml", a.nvml), ("live", a.live), ("torch", a.torch)):
        try:
            with open(path) as fh:
                docs.append(json.load(fh))
        except (OSError, TypeError, ValueError) as e:
            write_result(a.results_dir, NAME, "FAIL", f"{what}: {path}: {e}")
            return 1
    nvml, live, torch_out = docs
    bad += check_nvml(nvml, smi_rows(a.smi))
    lb, exact = check_live(live, torch_out)
    bad += lb
    sb, said = check_schema([nvml, live])
    bad += sb
    summary = (f"one NVML reading: {len(nvml.get('devices') or [])} GPU(s) as nvidia-smi says; from the running "
               f"gputop: {exact}/{len(torch_out['snapshots'])} rows equal torch's counters to the byte, "
               f"{len(live.get('agents') or [])} agent(s); {said}")
    if bad:
        summary += "; " + "; ".join(bad[:4])
    write_result(a.results_dir, NAME, "FAIL" if bad else "PASS", summary, problems=bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
