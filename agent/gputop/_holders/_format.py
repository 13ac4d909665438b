"""Text for people: byte counts and the "dtype[shape]" examples of a group
(the table they make is _result's)."""

from __future__ import annotations

from typing import Any


def format_bytes(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def _desc(t: Any) -> str:
    try:
        dt = str(t.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(str(int(s)) for s in t.shape)}]"
    except Exception:
        return "?"


def _examples(members: list[tuple[int, Any, str, str]]) -> list[str]:
    out: list[str] = []
    for _, t, _, _ in sorted(members, key=lambda m: -m[0]):
        d = _desc(t)
        if d not in out:
            out.append(d)
        if len(out) == 3:
            break
    return out
