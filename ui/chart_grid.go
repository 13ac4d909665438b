// The chart's grid: a cell per terminal cell (a rune and a style index, 8
// bytes, where ntcharts' canvas keeps a whole style), its axes, and the
// string drawn from it.

package ui

import (
	"image/color"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/NimbleMarkets/ntcharts/v2/canvas/runes"
)

// grid is the chart's drawing surface: a rune and a style number per cell.
// ntcharts' canvas keeps a whole lipgloss.Style in every cell (656 bytes;
// 3-5 MiB at 160x50, a tenth of gputop's memory budget, cleared at every
// redraw); the chart only ever uses a handful of styles.
type grid struct {
	w, h   int
	cells  []gridCell
	styles []lipgloss.Style // index 0: none
	keys   []styleKey       // keyOf(styles[i]), computed once
}

type gridCell struct {
	r  rune // 0: empty
	st uint8
}

// reset sizes the grid and empties it.
func (g *grid) reset(w, h int) {
	if g.w != w || g.h != h {
		g.w, g.h = w, h
		g.cells = make([]gridCell, w*h)
	} else {
		clear(g.cells)
	}
	g.styles = append(g.styles[:0], lipgloss.NewStyle())
	g.keys = append(g.keys[:0], styleKey{})
}

// style returns the number of s, adding it.
func (g *grid) style(s lipgloss.Style) uint8 {
	k := keyOf(s)
	if i := slices.Index(g.keys, k); i >= 0 {
		return uint8(i)
	}
	if len(g.styles) == 255 {
		return 0
	}
	g.styles = append(g.styles, s)
	g.keys = append(g.keys, k)
	return uint8(len(g.styles) - 1)
}

func (g *grid) in(x, y int) bool { return x >= 0 && y >= 0 && x < g.w && y < g.h }

func (g *grid) at(x, y int) gridCell {
	if !g.in(x, y) {
		return gridCell{}
	}
	return g.cells[y*g.w+x]
}

func (g *grid) set(x, y int, r rune, st uint8) {
	if g.in(x, y) {
		g.cells[y*g.w+x] = gridCell{r, st}
	}
}

// setString writes s from (x, y) rightwards, cut at the grid's edge.
func (g *grid) setString(x, y int, s string, st uint8) {
	for _, r := range s {
		g.set(x, y, r, st)
		x++
	}
}

// braille lights the dots of r at (x, y), keeping dots already there (as
// ntcharts' graph.DrawBrailleRune does): the cell takes st.
func (g *grid) braille(x, y int, r rune, st uint8) {
	if r == runes.Null || !runes.IsBraillePattern(r) || !g.in(x, y) {
		return
	}
	if cur := g.at(x, y).r; cur != runes.Null {
		r = runes.CombineBraillePatterns(cur, r)
	}
	g.set(x, y, r, st)
}

// axes draws the X and Y axes and their labels as ntcharts' linechart does
// (WithXYSteps(xStep, yStep), x from minX to maxX, y from 0 to maxY) and
// returns the origin: the corner of the axes.
func (g *grid) axes(minX, maxX, maxY float64, xStep, yStep int, xFmt, yFmt func(float64) string, axis, label uint8) (ox, oy int) {
	ox, oy = 0, g.h-1
	gw, gh := g.w, g.h
	if xStep > 0 { // the last two rows: the X axis and its labels
		oy--
		gh -= 2
	}
	if yStep > 0 { // room left of the Y axis for its widest label
		width, last := 0, ""
		for i := 0; i <= gh; i += yStep {
			if s := yFmt(maxY / float64(gh) * float64(i)); s != last {
				width, last = max(width, len(s)), s
			}
		}
		ox += width
		gw -= width + 1
	}
	g.set(ox, oy, runes.LineUpRight, axis)
	for y := oy - 1; y >= 0; y-- {
		g.set(ox, y, runes.LineVertical, axis)
	}
	for x := ox + 1; x < g.w; x++ {
		g.set(x, oy, runes.LineHorizontal, axis)
	}
	if yStep > 0 {
		last := ""
		for i := 0; i <= gh; i += yStep {
			if s := yFmt(maxY / float64(gh) * float64(i)); s != last {
				g.setString(ox-len(s), oy-i, s, label)
				last = s
			}
		}
	}
	if xStep > 0 {
		last := ""
		for i := 0; i < gw; i += xStep {
			// a label only where the one before it has ended, and whole
			if g.at(ox+i-1, oy+1).r != runes.Null {
				continue
			}
			s := xFmt(minX + (maxX-minX)/float64(gw)*float64(i))
			if s != last && len(s)+ox+i <= g.w {
				g.setString(ox+i, oy+1, s, label)
				last = s
			}
		}
	}
	return ox, oy
}

// styleKey identifies a chart style: the chart only uses foreground colour
// and bold.
type styleKey struct {
	fg   color.Color
	bold bool
}

// keyOf is what the chart's text needs from a style: the chart only uses
// foreground colour and bold.
func keyOf(s lipgloss.Style) styleKey {
	k := styleKey{fg: s.GetForeground(), bold: s.GetBold()}
	if _, none := k.fg.(lipgloss.NoColor); none {
		k.fg = nil
	}
	return k
}

// gridString is the grid as lines of text: each run of cells that share a
// style is styled once, with the style's escape codes computed once per
// style, instead of a lipgloss Render per cell.
func (c *chartModel) gridString(g *grid) string {
	var sb strings.Builder
	sb.Grow(g.w * g.h * 4)
	run := make([]rune, 0, g.w)
	for y := 0; y < g.h; y++ {
		if y > 0 {
			sb.WriteByte('\n')
		}
		var cur styleKey
		var curStyle lipgloss.Style
		run = run[:0]
		flush := func() {
			if len(run) == 0 {
				return
			}
			if cur.fg == nil && !cur.bold {
				sb.WriteString(string(run))
			} else {
				codes, ok := c.ansi[cur]
				if !ok {
					before, after, _ := strings.Cut(curStyle.Render("\x00"), "\x00")
					codes = [2]string{before, after}
					c.ansi[cur] = codes
				}
				sb.WriteString(codes[0])
				sb.WriteString(string(run))
				sb.WriteString(codes[1])
			}
			run = run[:0]
		}
		for _, cell := range g.cells[y*g.w : (y+1)*g.w] {
			r := cell.r
			k := cur
			if r == runes.Null || r == ' ' {
				// a blank joins the run it is in
				r = ' '
			} else {
				k = g.keys[cell.st]
			}
			if k != cur {
				flush()
				cur, curStyle = k, g.styles[cell.st]
			}
			run = append(run, r)
		}
		flush()
	}
	return sb.String()
}
