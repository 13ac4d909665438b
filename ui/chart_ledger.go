// The chart's stacked view of the ledger (the b key): at each of the
// selected process's rows with a ledger, a bar of its parts stacked in the
// compact ledger's order and colours, and a legend naming each part with
// its figure at the selected row.

package ui

import (
	"math"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/NimbleMarkets/ntcharts/v2/canvas/runes"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/printable"
)

// ledgerView is the chart's stacked view as chartData carries it.
type ledgerView struct {
	On   bool
	Bars []present.LedgerBar
	Sel  int    // the bar the legend gives the figures of; -1 none
	Why  string // the selected row's: "selected row" or "newest row at the cursor"
	Note string // what the view lacks (no bars)
}

func (a *ledgerView) equal(b *ledgerView) bool {
	if a.On != b.On || a.Sel != b.Sel || a.Why != b.Why || a.Note != b.Note || len(a.Bars) != len(b.Bars) {
		return false
	}
	for i := range a.Bars {
		x, y := &a.Bars[i], &b.Bars[i]
		if x.T != y.T || x.ID != y.ID || x.Label != y.Label || len(x.Ledger.Parts) != len(y.Ledger.Parts) {
			return false
		}
		for j := range x.Ledger.Parts {
			if x.Ledger.Parts[j] != y.Ledger.Parts[j] {
				return false
			}
		}
	}
	return true
}

// pickLedgerBar is the bar whose figures the legend gives: the selected
// row's when it has one in the window, else the newest at or before the
// cursor.
func pickLedgerBar(bars []present.LedgerBar, selID uint64, selOK bool, cursor int64) (int, string) {
	if selOK {
		for i, b := range bars {
			if b.ID == selID {
				return i, "selected row"
			}
		}
	}
	sel := -1
	for i, b := range bars {
		if b.T <= cursor {
			sel = i
		}
	}
	return sel, "newest row at the cursor"
}

// stackHeight is what a bar's known parts add up to.
func stackHeight(b *present.LedgerBar) uint64 {
	var sum uint64
	for _, p := range b.Ledger.Parts {
		if p.Known {
			sum += p.Bytes
		}
	}
	return sum
}

// drawStacks draws each bar one cell wide at its row's time, from the
// bottom of the plot: a cell takes the colour of the part at its middle,
// the top cell an eighths block (ntcharts' lower block elements).
func (c *chartModel) drawStacks(g *grid, x0, gw, gh int, maxY float64) bool {
	d := &c.data
	span := d.To - d.From
	if span <= 0 || maxY <= 0 {
		return false
	}
	eighths := func(v uint64) int { return int(math.Round(float64(v) / maxY * float64(gh*8))) }
	drawn := false
	for i := range d.Ledger.Bars {
		b := &d.Ledger.Bars[i]
		x := int((b.T - d.From) * int64(gw) / span)
		if x < 0 || x >= gw {
			continue
		}
		// the parts' tops, in eighths of a cell from the bottom
		var tops [16]int
		var names [16]string
		n, sum := 0, uint64(0)
		for _, p := range b.Ledger.Parts {
			if !p.Known || p.Bytes == 0 || n == len(tops) {
				continue
			}
			sum += p.Bytes
			tops[n], names[n] = eighths(sum), p.Name
			n++
		}
		if n == 0 {
			continue
		}
		top := tops[n-1]
		partAt := func(e int) string {
			for k := 0; k < n; k++ {
				if e < tops[k] {
					return names[k]
				}
			}
			return names[n-1]
		}
		for cy := 0; cy < gh && cy*8 < top; cy++ {
			r, mid := runes.FullBlock, cy*8+4
			if fill := top - cy*8; fill < 8 {
				r, mid = runes.LowerBlockElementFromFloat64(float64(fill)/8), cy*8+fill/2
			}
			if r == runes.Null {
				continue
			}
			g.set(x0+x, gh-1-cy, r, g.style(c.styles.LedgerPart[partAt(mid)]))
			drawn = true
		}
	}
	return drawn
}

// ledgerLegend is the stacked view's legend, wrapped to the width: the
// row its figures are of, then each part's letter in its colour (from
// ledgerWide cells its name too) and its figure.
func (c *chartModel) ledgerLegend() []string {
	st := c.styles
	lv := &c.data.Ledger
	if lv.Sel < 0 || lv.Sel >= len(lv.Bars) {
		note := lv.Note
		if note == "" {
			note = "ledger: no row with a ledger at or before the cursor"
		}
		return []string{st.Dim.Render(note)}
	}
	b := &lv.Bars[lv.Sel]
	head := st.Bold.Render("ledger") + " " + truncate(`"`+printable.Clean(b.Label)+`"`, max(c.w/3, 8))
	if c.w >= ledgerWide {
		head += " " + st.Dim.Render("("+lv.Why+")")
	}
	tokens := []string{head + ":"}
	wide := c.w >= ledgerWide
	for _, p := range b.Ledger.Parts {
		name := st.LedgerPart[p.Name].Render("█" + p.Short)
		if wide {
			name += " " + p.Title
		}
		v := humanBytes(p.Bytes)
		if !p.Known {
			v = "unknown"
		}
		tokens = append(tokens, name+" "+v)
	}
	var lines []string
	cur := ""
	for _, t := range tokens {
		switch {
		case cur == "":
			cur = t
		case lipgloss.Width(cur)+1+lipgloss.Width(t) <= c.w:
			cur += " " + t
		default:
			lines, cur = append(lines, cur), t
		}
	}
	lines = append(lines, cur)
	for i, l := range lines {
		lines[i] = truncate(l, c.w)
	}
	return lines
}

// ledgerLegendRoom is how many lines the stacked view's legend may take:
// the plot keeps at least four.
func ledgerLegendRoom(lines []string, h int) []string {
	room := max(h-1-6, 1) // a marker line, and a plot of 4 rows with its X axis
	if len(lines) > room {
		lines = lines[:room]
	}
	return lines
}

// joinLines ends each line but the last.
func joinLines(ls []string) string { return strings.Join(ls, "\n") }
