"""Text for people: the holders table (HoldersResult's repr), byte counts,
and the "dtype[shape]" examples of a group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._result import HoldersResult


def format_bytes(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def format_table(res: HoldersResult, top: int | None = None) -> str:
    head = (f"gputop holders on {res.device}: {format_bytes(res.total)} in "
            f"{len(res.groups)} group{'s' if len(res.groups) != 1 else ''}"
            f" ({res.took_ms:.1f} ms, {res.skipped} skipped)")
    lines = [head]
    if res.error:
        lines.append(f"  walk failed: {res.error}")
    groups = res.groups if top is None else res.groups[:top]
    if not groups:
        if not res.error:
            lines.append(f"  nothing holds {res.device} memory")
        return "\n".join(lines)
    rows = [(format_bytes(g.bytes), str(g.tensors), g.kind, g.name, ", ".join(g.examples[:2]))
            for g in groups]
    hdr = ("BYTES", "TENSORS", "KIND", "HOLDER", "EXAMPLES")
    wid = [max(len(hdr[i]), *(len(r[i]) for r in rows)) for i in range(4)]
    fmt = f"  {{:>{wid[0]}}}  {{:>{wid[1]}}}  {{:<{wid[2]}}}  {{:<{wid[3]}}}  {{}}"
    lines.append(fmt.format(*hdr).rstrip())
    for g, r in zip(groups, rows):
        lines.append(fmt.format(*r).rstrip())
        if g.hint:
            lines.append(f"  {'':>{wid[0]}}  -> {g.hint}")
    if top is not None and len(res.groups) > top:
        lines.append(f"  ... {len(res.groups) - top} more")
    return "\n".join(lines)


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
