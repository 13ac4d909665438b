"""Random frames through Go: what the Python encoder writes, Go's
encoding/json decodes into the wire structs (unknown fields refused) and
writes back (HTML escaping off, as the vectors); the bytes must not change.
That checks key order, omitempty, string escapes and float formatting over
far more values than the fixed vectors."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, find_go

from gputop import _wire

GO_MAIN = r'''
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"wirecheck/wire"
)

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for sc.Scan() {
		line := sc.Bytes()
		var h wire.Head
		if err := json.Unmarshal(line, &h); err != nil {
			fmt.Fprintf(w, "ERR head: %v\n", err)
			continue
		}
		var v any
		switch h.Type {
		case "hello":
			v = &wire.Hello{}
		case "sample":
			v = &wire.Sample{}
		case "mark":
			v = &wire.Mark{}
		case "oom":
			v = &wire.OOM{}
		case "holders":
			v = &wire.Holders{}
		case "bye":
			v = &wire.Bye{}
		case "snap":
			v = &wire.Snap{}
		case "reply":
			v = &wire.Reply{}
		case "request":
			v = &wire.Request{}
		case "snapshot":
			v = &wire.Row{}
		case "ended":
			v = &wire.Ended{}
		case "procs":
			v = &wire.Procs{}
		case "nvml":
			v = &wire.NVML{}
		case "samples":
			v = &wire.Samples{}
		case "held":
			v = &wire.RowHeld{}
		default:
			fmt.Fprintf(w, "ERR type %q\n", h.Type)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			fmt.Fprintf(w, "ERR decode: %v\n", err)
			continue
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(w, "ERR encode: %v\n", err)
		}
	}
}
'''


@pytest.fixture(scope="module")
def go_roundtrip(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("wirecheck")
    (d / "wire").mkdir()
    for name in ("frames.go", "status.go"):  # the frames, and the status report a reply holds
        shutil.copy(REPO / "wire" / name, d / "wire" / name)
    (d / "go.mod").write_text("module wirecheck\n\ngo 1.22\n")
    (d / "main.go").write_text(GO_MAIN)
    exe = d / "roundtrip"
    r = subprocess.run([find_go(), "build", "-o", str(exe), "."], cwd=d,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"})
    assert r.returncode == 0, r.stderr
    return str(exe)


ALPHABET = (
    list("abcXYZ 019_-./:") + ['"', "\\", "<", ">", "&", "\n", "\t", "\r", "\b", "\f",
                               "\x00", "\x01", "\x1f", "\x7f", "é", "—", "训", "\u2028",
                               "\u2029", "\ufffd", "\U0001f525", "\u00a0", "\ufeff"]
)


def rstr(r: random.Random) -> str:
    return "".join(r.choice(ALPHABET) for _ in range(r.randint(0, 12)))


def rint(r: random.Random, big: int = 2**64 - 1) -> int:
    return r.choice([0, 0, 1, r.randint(0, 1 << 20), r.randint(0, big)])


def rfloat(r: random.Random) -> float:
    return r.choice([0.0, 100.0, 12.5, r.uniform(0, 1000), r.uniform(0, 1e-5), 10 ** r.uniform(-12, 25),
                     round(r.uniform(0, 100), 3), float(r.randint(1, 10**6))])


def rgroup(r: random.Random) -> dict:
    return {"kind": rstr(r), "name": rstr(r), "bytes": rint(r), "tensors": r.randint(0, 10**6),
            "examples": [rstr(r) for _ in range(r.randint(0, 2))], "hint": rstr(r)}


def rheld(r: random.Random) -> dict:
    return {"t": r.randint(1, 2**63 - 1), "allocated": rint(r), "python": rint(r), "internal": rint(r),
            "workspaces": r.randint(0, 9), "unaccounted": rint(r),
            "top": [rgroup(r) for _ in range(r.randint(0, 3))], "skipped": r.choice(["", rstr(r)]),
            "took_ms": rfloat(r)}


def random_frame(r: random.Random) -> dict:
    t = r.randint(1, 2**63 - 1)
    kind = r.choice(["hello", "sample", "mark", "oom", "holders", "bye", "snap", "reply",
                     "request", "snapshot", "ended", "held"])
    if kind == "held":
        return {"type": "held", "pid": r.randint(1, 99), "t": t, "dev": r.randint(0, 7), "held": rheld(r)}
    if kind == "hello":
        return {"type": "hello", "v": 1, "pid": r.randint(1, 2**22), "host": rstr(r),
                "argv": [rstr(r) for _ in range(r.randint(0, 3))], "torch": rstr(r),
                "python": rstr(r), "rate_hz": rfloat(r),
                "devices": [{"index": i, "uuid": rstr(r), "name": rstr(r), "total": rint(r)}
                            for i in range(r.randint(0, 3))], "t": t}
    if kind == "sample":
        return {"type": "sample", "t": t, "dev": r.randint(0, 7),
                **{k: rint(r) for k in ("allocated", "reserved", "peak", "reserved_peak", "inactive",
                                        "alloc_retries", "ooms", "dropped")}}
    if kind == "mark":
        return {"type": "mark", "t": t, "label": rstr(r),
                "kind": r.choice(["", "snapshot", "phase_start", "phase_end"]),
                "end": r.choice([None, True, False]),
                "devs": [{"dev": d, "allocated": rint(r), "reserved": rint(r), "peak": rint(r),
                          "held": r.choice([None, rheld(r)])}
                         for d in range(r.randint(0, 3))]}
    if kind == "oom":
        return {"type": "oom", "t": t, "dev": r.randint(0, 7), "requested": rint(r), "free": rint(r),
                "allocated": rint(r), "reserved": rint(r), "peak": rint(r)}
    if kind == "holders":
        return {"type": "holders", "t": t, "id": r.randint(0, 99), "dev": r.randint(0, 7),
                "total": rint(r), "skipped": r.randint(0, 9), "took_ms": rfloat(r),
                "groups": [rgroup(r) for _ in range(r.randint(0, 3))],
                "held": r.choice([None, rheld(r)])}
    if kind == "bye":
        return {"type": "bye", "t": t, "pid": r.choice([0, 42])}
    if kind == "snap":
        return {"type": "snap", "v": 1, "label": rstr(r), "end": r.choice([None, True, False])}
    if kind == "reply":
        return {"type": "reply", "ok": r.random() < 0.5, "error": rstr(r)}
    if kind == "request":
        return {"type": "request", "what": "holders", "id": r.randint(0, 10**6),
                "dev": r.choice([None, 0, 3])}
    if kind == "snapshot":
        f = {"type": "snapshot", "t": t, "label": rstr(r), "dev": r.randint(0, 3),
             "pid": r.choice([0, 7]), "source": r.choice(["agent", "key", "cli", "oom"]),
             "kind": r.choice(["", "phase_start", "oom"])}
        for k in ("allocated", "reserved", "peak", "nvml_used", "nvml_peak"):
            if r.random() < 0.6:
                f[k] = rint(r)
        f["end"] = r.random() < 0.5
        f["held"] = r.choice([None, rheld(r)])
        f["awaiting"] = r.random() < 0.3
        f["procs"] = r.choice([None, [], [{"pid": r.randint(1, 99), "name": rstr(r), "used": rint(r),
                                           "used_unknown": r.random() < 0.2}]])
        return f
    return {"type": "ended", "pid": r.randint(1, 99), "t": t, "reason": rstr(r)}


def test_random_frames_survive_go_unchanged(go_roundtrip: str):
    r = random.Random(20260101)
    frames = [random_frame(r) for _ in range(3000)]
    lines = [_wire.encode(f) for f in frames]
    p = subprocess.run([go_roundtrip], input=b"".join(lines), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    back = p.stdout.splitlines(keepends=True)
    assert len(back) == len(lines)
    for f, mine, go in zip(frames, lines, back):
        assert mine == go, f"frame {f!r}:\n python {mine!r}\n go     {go!r}"


def test_invalid_utf8_argv_like_go(go_roundtrip: str, tmp_path: Path):
    # sys.argv holds undecodable bytes as lone surrogates; Go, handed the
    # same bytes, writes one \ufffd per bad byte.
    raw = b"caf\xe9-\xff.py"
    py = _wire.encode({"type": "hello", "v": 1, "pid": 1, "argv": [raw.decode("utf-8", "surrogateescape")],
                       "devices": [], "t": 1})
    prog = tmp_path / "main.go"
    prog.write_text('package main\nimport ("encoding/json";"os")\n'
                    'func main(){e:=json.NewEncoder(os.Stdout);e.SetEscapeHTML(false)\n'
                    'e.Encode(struct{A []string `json:"argv"`}{[]string{"caf\\xe9-\\xff.py"}})}\n')
    out = subprocess.run([find_go(), "run", str(prog)], capture_output=True, timeout=120,
                         env={**os.environ, "GOWORK": "off"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    go_argv = out.stdout.strip()[len(b'{"argv":'):-1]
    assert b'"argv":' + go_argv in py
