"""Where the gaps between NVML samples come from: the largest gaps in a
gputop recording's NVML series beside the largest in `nvidia-smi
--query-gpu=timestamp,memory.used --format=csv,noheader -lms 1` run at the
same time, each placed against the workload's own moments (its start, its
first and last spike, its exit). A gap both tools see at the same moment is
the driver's (or the GPU's); one only gputop sees is gputop's.

    python bench/nvml_gaps.py --rec R.gputop --smi smi.csv --events ev.json \
        [--results-dir R]
    python bench/nvml_gaps.py --dry-run

--events: JSON {"name": wall ns, ...} (scripts/gpu-check.sh's spikes step
writes the workload's start and exit; spikes.py's --out adds its spikes).
nvidia-smi's timestamps are read as UTC (run it with TZ=UTC).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_result  # noqa: E402

NAME = "21-nvml-gaps"


def smi_times(path: str) -> list[int]:
    """Wall ns of each nvidia-smi line (timestamp, memory.used)."""
    out = []
    with open(path, errors="replace") as fh:
        for line in fh:
            ts = line.split(",")[0].strip()
            try:
                t = dt.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
            except ValueError:
                continue
            out.append(int(t.timestamp() * 1e9))
    return out


def gaps(ts: list[int], n: int = 5, least_ms: float = 5) -> list[tuple[int, float]]:
    """The n largest gaps of least_ms or more: (their start, ms)."""
    ts = sorted(ts)
    g = sorted(((b - a, a) for a, b in zip(ts, ts[1:]) if b - a >= least_ms * 1e6), reverse=True)[:n]
    return [(a, d / 1e6) for d, a in g]


def place(t: int, events: dict[str, int]) -> str:
    """t against the nearest event."""
    if not events:
        return ""
    name, at = min(events.items(), key=lambda kv: abs(kv[1] - t))
    return f"{(t - at) / 1e6:+.0f} ms from {name}"


def report(rec_ts: list[int], smi_ts: list[int], events: dict[str, int]) -> tuple[str, dict]:
    lines, both = [], 0
    g_rec, g_smi = gaps(rec_ts), gaps(smi_ts)
    for who, g, other in (("gputop", g_rec, g_smi), ("nvidia-smi", g_smi, g_rec)):
        for a, ms in g:
            # the other tool has a gap of at least a third of this one overlapping it
            shared = any(b < a + ms * 1e6 and a < b + oms * 1e6 and oms >= ms / 3 for b, oms in other)
            both += shared and who == "gputop"
            lines.append(f"{who}: {ms:.1f} ms at {place(a, events)}{' (both)' if shared else ''}")
    top = g_rec[0][1] if g_rec else 0.0
    smi_top = g_smi[0][1] if g_smi else 0.0
    summary = (f"largest gap gputop {top:.1f} ms, nvidia-smi -lms 1 {smi_top:.1f} ms; "
               f"{both} of gputop's {len(g_rec)} largest also in nvidia-smi's; "
               + (lines[0] if lines else "no samples"))
    return summary, {"lines": lines, "gputop": g_rec, "smi": g_smi}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rec")
    ap.add_argument("--smi")
    ap.add_argument("--events")
    ap.add_argument("--results-dir")
    ap.add_argument("--dry-run", action="store_true", help="made series: a shared gap and one of gputop's own")
    a = ap.parse_args(argv)
    if a.dry_run:
        ms = 1_000_000
        rec = [i * ms for i in range(1000) if not 400 < i < 505 and not 700 < i < 730]
        smi = [i * ms for i in range(1000) if not 398 < i < 503]
        s, d = report(rec, smi, {"exit": 400 * ms})
        assert "(both)" in d["lines"][0] and "(both)" not in d["lines"][1], d["lines"]
        assert abs(d["gputop"][0][1] - 105) < 1e-6, d
        print("dry run: " + s)
        return 0
    if not (a.rec and a.smi):
        ap.error("--rec and --smi are needed (or --dry-run)")
    import rec as recmod

    r = recmod.load(a.rec)
    dev = r.busiest_device()
    rec_ts = r.nvml[dev].t if dev is not None else []
    events: dict[str, int] = {}
    if a.events and os.path.exists(a.events):
        with open(a.events) as fh:
            events = {k: int(v) for k, v in json.load(fh).items()}
    summary, d = report(rec_ts, smi_times(a.smi), events)
    for line in d["lines"]:
        print(line)
    write_result(a.results_dir, NAME, "INFO", summary, **d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
