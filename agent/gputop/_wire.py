"""Frames on the agent socket, encoded byte for byte as Go's encoding/json
writes the structs in wire/frames.go (their schemas: _wire_schema.py).

A frame is one compact JSON object ending in "\\n". Keys come in the order
of the Go struct's fields; a field tagged omitempty is left out when it holds
its zero value (0, "", false, an empty list), a pointer field when it is None.
Strings are escaped as Go's encoder escapes them with HTML escaping off
(the form testdata/protocol/README.md fixes): non-ASCII, <, > and & as
themselves, U+2028/U+2029 as \\u escapes, invalid text as \\ufffd. Floats
are written as Go writes a float64.
Matching Go exactly lets the Python tests produce the same bytes as the
shared vectors in testdata/protocol that the Go tests decode.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any, Mapping, Sequence

from ._wire_schema import (  # noqa: F401  (the nested schemas, re-exported)
    AGENT_DEVICE,
    ALLOC_SETTINGS,
    DEV_STATS,
    DUMP,
    HELD,
    HOLDER_GROUP,
    LAYOUT,
    FIGURE,
    FRAMEWORK,
    LEDGER,
    POOL,
    PROC,
    SCHEMAS,
    SETTING,
)

VERSION = 1
"""Protocol version sent in hello (wire.Version)."""

MAX_FRAME_BYTES = 1 << 20
"""Longest line either side accepts (wire.MaxFrameBytes)."""

# The schemas (_wire_schema.py, written from wire/schema.go's table by
# `go generate ./wire`): one per frame type, SCHEMAS, and one of each struct
# inside them, as AGENT_DEVICE. A field is (json key, kind, omitempty, nested schema). Kinds: i integer,
# f float64, s string, b bool, ls list of strings, li list of integers,
# L list of structs; pointers, which omitempty drops only when None: p to an
# integer, pb to a bool, O to a struct, pL to a list of structs.
# Go's appendString with escapeHTML off: short escapes for these, \u00XX
# for the other control characters, \u escapes for the JavaScript line
# terminators U+2028/U+2029; invalid UTF-8 becomes \ufffd.
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE = re.compile('[\x00-\x1f"\\\\\u2028\u2029\ud800-\udfff]')


def _escape(m: re.Match) -> str:
    c = m.group(0)
    s = _SHORT.get(c)
    if s is not None:
        return s
    o = ord(c)
    if 0xD800 <= o <= 0xDFFF:
        # A lone surrogate stands for bytes that were not UTF-8: 0xDC80..0xDCFF
        # is one undecodable byte (surrogateescape, as in sys.argv); any other
        # would be three bytes Go cannot decode, each becoming U+FFFD.
        return "\\ufffd" if 0xDC80 <= o <= 0xDCFF else "\\ufffd" * 3
    return "\\u%04x" % o


def string(s: str) -> str:
    """A JSON string literal exactly as Go's encoding/json writes it."""
    return '"' + _ESCAPE.sub(_escape, s) + '"'


def float64(x: float) -> str:
    """A float exactly as Go's encoding/json writes a float64.

    Go picks the shortest digits that read back to the same value (as
    Python's repr does) and writes them without an exponent for
    1e-6 <= |x| < 1e21, else as 1e+21 / 1e-7.
    """
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{x!r} has no JSON form")
    a = abs(x)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        r = repr(x)  # shortest digits, always with an exponent in this range
        mant, _, exp = r.partition("e")
        sign = exp[0]
        digits = exp[1:].lstrip("0") or "0"
        if sign == "+" and len(digits) < 2:
            digits = digits.rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    s = format(Decimal(repr(x)), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def _int(v: Any, key: str) -> str:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        raise TypeError(f"{key}: want an integer, got {type(v).__name__} {v!r}")
    return str(v)


def _zero(kind: str, v: Any) -> bool:
    if v is None:
        return True
    if kind in ("ls", "li", "L"):
        return len(v) == 0
    if kind in ("p", "pb", "O", "pL"):
        return False
    return not v  # 0, 0.0, "", False


def _value(kind: str, v: Any, key: str, sub: tuple | None, strict: bool) -> str:
    if v is None:
        # Go's zero value for a field that is always written.
        return {"i": "0", "f": "0", "s": '""', "b": "false"}.get(kind, "null")
    if kind == "i" or kind == "p":
        return _int(v, key)
    if kind == "s":
        if not isinstance(v, str):
            raise TypeError(f"{key}: want a string, got {type(v).__name__}")
        return string(v)
    if kind == "f":
        if isinstance(v, bool):
            raise TypeError(f"{key}: want a number, got bool")
        return float64(v)
    if kind == "b" or kind == "pb":
        if not isinstance(v, bool):
            raise TypeError(f"{key}: want a bool, got {type(v).__name__}")
        return "true" if v else "false"
    if kind == "O":
        return _object(sub or (), v, strict, key)
    if kind == "ls":
        return "[" + ",".join(string(str(x)) for x in v) + "]"
    if kind == "li":
        return "[" + ",".join(_int(x, key) for x in v) + "]"
    if kind == "L" or kind == "pL":
        return "[" + ",".join(_object(sub or (), x, strict, key) for x in v) + "]"
    raise AssertionError(kind)


def _object(schema: tuple, obj: Mapping[str, Any], strict: bool, where: str) -> str:
    if not isinstance(obj, Mapping):
        raise TypeError(f"{where}: want an object, got {type(obj).__name__}")
    if strict:
        known = {f[0] for f in schema}
        extra = [k for k in obj if k not in known]
        if extra:
            raise KeyError(f"{where}: unknown field(s) {', '.join(map(repr, extra))}")
    parts = []
    for key, kind, omit, sub in schema:
        v = obj.get(key)
        if omit and _zero(kind, v):
            continue
        parts.append(string(key) + ":" + _value(kind, v, key, sub, strict))
    return "{" + ",".join(parts) + "}"


def encode(frame: Mapping[str, Any], strict: bool = True) -> bytes:
    """One frame as a line of bytes, as Go would marshal the matching struct.

    frame["type"] picks the struct. With strict, a key the struct does not
    have is an error; without, it is dropped as Go's decoder would drop it.
    """
    t = frame.get("type")
    schema = SCHEMAS.get(t) if isinstance(t, str) else None
    if schema is None:
        raise ValueError(f"unknown frame type {t!r}")
    return (_object(schema, frame, strict, str(t)) + "\n").encode("utf-8")


def sample_line(t: int, dev: int, c: Sequence[int], dropped: int) -> bytes:
    """A sample frame, the agent thread's hot path.

    Same bytes as encode({"type": "sample", ...}) (a test holds them equal)
    at a fraction of the cost. c is (allocated, reserved, peak,
    reserved_peak, inactive, alloc_retries, ooms).
    """
    s = '{"type":"sample","t":%d,"dev":%d,"allocated":%d,"reserved":%d,"peak":%d' % (
        t, dev, c[0], c[1], c[2])
    if c[3]:
        s += ',"reserved_peak":%d' % c[3]
    if c[4]:
        s += ',"inactive":%d' % c[4]
    if c[5]:
        s += ',"alloc_retries":%d' % c[5]
    if c[6]:
        s += ',"ooms":%d' % c[6]
    if dropped:
        s += ',"dropped":%d' % dropped
    return (s + "}\n").encode()


# wire.IsEndLabel: a row that ends a run gets a verdict (testdata/protocol/
# end_labels.json holds both sides to the same labels)
_END_WORD = re.compile(r"(\bend\b|\(end\)\s*$)", re.I)
_CLEANUP_WORD = re.compile(r"clean[ _-]?up", re.I)
_BEFORE_WORD = re.compile(r"(\bbefore\b|\bpre\b|\bpre[ _-]?clean)", re.I)


def is_end_label(label: str) -> bool:
    """True when a label ends a run: "end" as a word ("Training end"),
    "(end)" at its end ("eval (end)"), or a cleanup not still to come
    ("After cleanup", not "Before cleanup")."""
    # most labels ("Epoch 5") have neither word: no pattern is tried, which
    # matters in snapshot(), often called with cold caches
    low = label.lower()
    if "end" not in low and "clean" not in low:
        return False
    if _END_WORD.search(label):
        return True
    return bool(_CLEANUP_WORD.search(label)) and not _BEFORE_WORD.search(label)


def decode(line: bytes | str) -> dict[str, Any]:
    """Parse one line from gputop; a frame is an object with a string type."""
    if len(line) > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {len(line)} bytes exceeds {MAX_FRAME_BYTES}")
    obj = json.loads(line)
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ValueError("frame is not an object with a string \"type\"")
    return obj
