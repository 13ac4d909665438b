#!/usr/bin/env python3
"""Read a gputop recording (newline-delimited JSON, frames as in wire/frames.go).

Used by the GPU-machine checks; also runnable on its own to summarise a file:

    python3 bench/rec.py run.gputop

Standard library only, so it runs where gputop's Python agent and torch are
missing. A recording cut short by a kill may end in half a line: that line is
counted as an error and everything before it is kept.
"""
from __future__ import annotations

import argparse
import bisect
import json
import sys
from dataclasses import dataclass, field

MIB = 1 << 20
GIB = 1 << 30


@dataclass
class Series:
    """NVML used/reserved of one device, decoded from the delta-encoded batches."""

    t: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    reserved: list[int] = field(default_factory=list)

    def sort(self) -> None:
        if all(a <= b for a, b in zip(self.t, self.t[1:])):
            return
        order = sorted(range(len(self.t)), key=self.t.__getitem__)
        self.t = [self.t[i] for i in order]
        self.used = [self.used[i] for i in order]
        if self.reserved:
            self.reserved = [self.reserved[i] for i in order]

    def at(self, t: int) -> int | None:
        """Used at time t: the last sample at or before t."""
        i = bisect.bisect_right(self.t, t) - 1
        return self.used[i] if i >= 0 else None

    def window(self, t0: int, t1: int) -> list[int]:
        """Used values of the samples with t0 <= t <= t1."""
        i = bisect.bisect_left(self.t, t0)
        j = bisect.bisect_right(self.t, t1)
        return self.used[i:j]

    def rate(self) -> dict:
        """Achieved sample rate and the gaps between samples."""
        n = len(self.t)
        if n < 2:
            return {"samples": n, "rate_hz": 0.0}
        span = (self.t[-1] - self.t[0]) / 1e9
        gaps = sorted(b - a for a, b in zip(self.t, self.t[1:]))
        return {
            "samples": n,
            "seconds": round(span, 3),
            "rate_hz": round((n - 1) / span, 1) if span > 0 else 0.0,
            "gap_median_ms": round(gaps[len(gaps) // 2] / 1e6, 3),
            "gap_p99_ms": round(gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] / 1e6, 3),
            "gap_max_ms": round(gaps[-1] / 1e6, 3),
        }


@dataclass
class Recording:
    path: str
    header: dict | None = None
    devices: dict[int, dict] = field(default_factory=dict)
    nvml: dict[int, Series] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    snapshots: list[dict] = field(default_factory=list)
    procs: list[dict] = field(default_factory=list)
    hellos: list[dict] = field(default_factory=list)
    ended: list[dict] = field(default_factory=list)
    byes: list[dict] = field(default_factory=list)
    ooms: list[dict] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    last_line_complete: bool = True

    def device_for_uuid(self, uuid: str) -> int | None:
        for i, d in self.devices.items():
            if d.get("uuid") == uuid:
                return i
        return None

    def busiest_device(self) -> int | None:
        """The device whose NVML used went highest (the one a job ran on)."""
        best, best_v = None, -1
        for dev, s in self.nvml.items():
            if s.used and max(s.used) > best_v:
                best, best_v = dev, max(s.used)
        return best

    def samples_of(self, pid: int) -> list[dict]:
        return [s for s in self.samples if s.get("pid") == pid]

    def summary(self) -> dict:
        out: dict = {
            "path": self.path,
            "frames": dict(sorted(self.counts.items())),
            "errors": len(self.errors),
            "first_errors": self.errors[:5],
            "devices": {str(k): v.get("name", "") for k, v in self.devices.items()},
            "nvml": {str(k): s.rate() for k, s in self.nvml.items()},
            "agent_pids": sorted({h.get("pid", 0) for h in self.hellos}),
            "snapshots": [s.get("label", "") for s in self.snapshots],
        }
        return out


def _decode_nvml(rec: Recording, f: dict) -> None:
    dev = int(f["dev"])
    s = rec.nvml.setdefault(dev, Series())
    t = int(f["t0"])
    dts = f.get("dt") or []
    used = f.get("used") or []
    res = f.get("reserved") or []
    if len(dts) != len(used):
        raise ValueError(f"nvml batch with {len(dts)} dt and {len(used)} used values")
    u = r = 0
    for i, dt in enumerate(dts):
        # dt[0] is 0 and used[0] is absolute: summing from zero covers both.
        t += int(dt)
        u += int(used[i])
        s.t.append(t)
        s.used.append(u)
        if res and i < len(res):
            r += int(res[i])
            s.reserved.append(r)


SAMPLE_LISTS = ("allocated", "reserved", "peak", "reserved_peak", "inactive", "alloc_retries", "ooms",
                "dropped")


def _decode_samples(rec: Recording, f: dict) -> None:
    """An agent sample batch (format version 2): one dict per sample, as the
    single sample frames of version 1 were."""
    dts = f["dt"]
    lists = {k: f[k] for k in SAMPLE_LISTS if k in f}
    for k, v in lists.items():
        if len(v) != len(dts):
            raise ValueError(f"samples batch with {len(dts)} dt and {len(v)} {k} values")
    t = int(f["t0"])
    acc = dict.fromkeys(lists, 0)
    for i, dt in enumerate(dts):
        t += int(dt)
        s = {"type": "sample", "pid": f["pid"], "t": t, "dev": f["dev"]}
        for k, v in lists.items():
            acc[k] = (acc[k] + int(v[i])) % (1 << 64)  # wrapping, as written
            if acc[k] or k in ("allocated", "reserved", "peak"):
                s[k] = acc[k]
        rec.samples.append(s)


def _header(rec: Recording, f: dict) -> None:
    rec.header = f


def _device(rec: Recording, f: dict) -> None:
    rec.devices[int(f["index"])] = f


def _row_edit(rec: Recording, f: dict) -> None:
    """A row the user renamed or deleted in gputop: the rows follow, as
    gputop export's do. The edit names its row by id; one without an id
    (recordings made before rows had ids) the first row that its time,
    device, pid and label fit."""
    key = (f["t"], f["dev"], f.get("pid", 0), f["label"])
    for i, s in enumerate(rec.snapshots):
        if (s["t"], s["dev"], s.get("pid", 0), s["label"]) == key and ("id" not in f or s.get("id") == f.get("id")):
            if f.get("delete"):
                del rec.snapshots[i]
            else:
                rec.snapshots[i] = {**s, "label": f.get("rename")}
            return


def _kept(name: str):
    """A decoder that keeps the frame as it is, in the Recording list name."""
    return lambda rec, f: getattr(rec, name).append(f)


# What load() does with the frame types of recording/FORMAT.md that the
# checks read: a decoder each; any other type is only counted
# (Recording.counts). agent/tests/test_bench_rec.py holds the decoders to
# wire/frames.go and FORMAT.md.
DECODERS = {
    "recording": _header,
    "device": _device,
    "nvml": _decode_nvml,
    "sample": _kept("samples"),
    "samples": _decode_samples,
    "snapshot": _kept("snapshots"),
    "row_edit": _row_edit,
    "procs": _kept("procs"),
    "hello": _kept("hellos"),
    "ended": _kept("ended"),
    "bye": _kept("byes"),
    "oom": _kept("ooms"),
}


def load(path: str) -> Recording:
    rec = Recording(path=path)
    offset = 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            start = offset
            offset += len(raw)
            if not raw.endswith(b"\n"):
                rec.last_line_complete = False
            line = raw.strip()
            if not line:
                continue
            try:
                f = json.loads(line)
                if not isinstance(f, dict):
                    raise ValueError("not a JSON object")
                typ = f.get("type", "")
                rec.counts[typ] = rec.counts.get(typ, 0) + 1
                decode = DECODERS.get(typ)
                if decode is not None:
                    decode(rec, f)
            except (ValueError, KeyError, TypeError) as e:
                rec.errors.append(f"{path}: line {lineno} (byte {start}): {e}")
    for s in rec.nvml.values():
        s.sort()
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", help="a gputop recording")
    ap.add_argument("--dry-run", action="store_true", help="check arguments and imports, then exit")
    a = ap.parse_args(argv)
    if a.dry_run:
        print("rec.py: dry run ok")
        return 0
    if not a.file:
        ap.error("a recording file is required")
    rec = load(a.file)
    json.dump(rec.summary(), sys.stdout, indent=2)
    print()
    return 1 if rec.errors else 0


if __name__ == "__main__":
    sys.exit(main())
