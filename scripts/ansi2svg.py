#!/usr/bin/env python3
"""Turn a `tmux capture-pane -e -p` screen into an SVG with every character
placed on its own terminal cell.

The chart is drawn with braille characters, which no monospace font in
Debian carries: the renderer takes them from a proportional fallback font,
and a tool that lays a line out as running text (freeze does) then shifts
everything after them sideways, markers included. Here each run of text gets
one x position per character, so the grid holds whatever font draws a glyph.

usage: ansi2svg.py SCREEN.ansi OUT.svg
"""

from __future__ import annotations

import html
import re
import sys

CELL_W, CELL_H, PAD = 8.4, 17.0, 12
FONT = "DejaVu Sans Mono, monospace"
BG, FG = "#171717", "#d0d0d0"

# xterm's 16 colours, then the 6x6x6 cube and the grey ramp
BASE16 = ["#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
          "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff"]


def color256(n: int) -> str:
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def sgr(params: list[int], st: dict) -> None:
    i = 0
    while i < len(params):
        p = params[i]
        if p == 0:
            st.clear()
        elif p == 1:
            st["bold"] = True
        elif p == 22:
            st.pop("bold", None)
        elif p == 7:
            st["reverse"] = True
        elif p == 27:
            st.pop("reverse", None)
        elif 30 <= p <= 37:
            st["fg"] = BASE16[p - 30]
        elif 90 <= p <= 97:
            st["fg"] = BASE16[p - 90 + 8]
        elif 40 <= p <= 47:
            st["bg"] = BASE16[p - 40]
        elif 100 <= p <= 107:
            st["bg"] = BASE16[p - 100 + 8]
        elif p == 39:
            st.pop("fg", None)
        elif p == 49:
            st.pop("bg", None)
        elif p in (38, 48) and i + 1 < len(params):
            key = "fg" if p == 38 else "bg"
            if params[i + 1] == 5 and i + 2 < len(params):
                st[key] = color256(params[i + 2])
                i += 2
            elif params[i + 1] == 2 and i + 4 < len(params):
                st[key] = "#%02x%02x%02x" % tuple(params[i + 2:i + 5])
                i += 4
        i += 1


def parse(line: str) -> list[tuple[str, dict]]:
    """One (character, style) per cell."""
    cells: list[tuple[str, dict]] = []
    st: dict = {}
    for m in re.finditer(r"\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|(.)", line):
        if m.group(2) is not None:
            cells.append((m.group(2), dict(st)))
        elif m.group(0).endswith("m") and m.group(1) is not None:
            sgr([int(x) if x else 0 for x in m.group(1).split(";")], st)
    return cells


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lines = open(sys.argv[1], encoding="utf-8").read().rstrip("\n").split("\n")
    rows = [parse(ln) for ln in lines]
    cols = max((len(r) for r in rows), default=0)
    w, h = PAD * 2 + cols * CELL_W, PAD * 2 + len(rows) * CELL_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}">',
           f'<rect width="100%" height="100%" fill="{BG}"/>',
           f'<g font-family="{FONT}" font-size="14" xml:space="preserve">']
    for y, row in enumerate(rows):
        top = PAD + y * CELL_H
        x = 0
        while x < len(row):
            st = row[x][1]
            j = x
            while j < len(row) and row[j][1] == st:
                j += 1
            fg, bg = st.get("fg", FG), st.get("bg")
            if st.get("reverse"):
                fg, bg = bg or BG, fg
            if bg:
                out.append(f'<rect x="{PAD + x * CELL_W:.1f}" y="{top:.1f}" width="{(j - x) * CELL_W:.1f}" '
                           f'height="{CELL_H:.1f}" fill="{bg}"/>')
            text = "".join(c for c, _ in row[x:j])
            if text.strip():
                xs = " ".join(f"{PAD + (x + k) * CELL_W:.1f}" for k in range(j - x))
                weight = ' font-weight="bold"' if st.get("bold") else ""
                out.append(f'<text x="{xs}" y="{top + CELL_H * 0.78:.1f}" fill="{fg}"{weight}>'
                           f"{html.escape(text)}</text>")
            x = j
    out.append("</g></svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        fh.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
