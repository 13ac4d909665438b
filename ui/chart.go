package ui

import (
	"math"
	"slices"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/NimbleMarkets/ntcharts/v2/canvas/runes"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// yLabelW is the fixed width of the Y axis labels, so the plot area keeps
// its place when the scale changes.
const yLabelW = 8 // "1.25 GiB"

// chartSeries is one line of the chart: aggregated columns (min/max/last per
// braille column) from the store, never raw samples.
type chartSeries struct {
	Name  string // legend label with its source, e.g. "allocated (torch)"
	Style lipgloss.Style
	Cols  []store.Column
	Hold  *uint64 // value at the window's left edge (last sample before it)
	Now   *uint64 // value at the cursor, for the legend
}

// chartData is everything one frame of the chart shows.
type chartData struct {
	From, To int64
	Window   time.Duration
	Series   []chartSeries
	Note     string // e.g. "allocator: no agent attached"
	Markers  []store.Marker
	Ledger   ledgerView // the stacked view of the ledger (b): drawn instead of the series
}

func (a *chartData) equal(b *chartData) bool {
	if a.From != b.From || a.To != b.To || a.Window != b.Window || a.Note != b.Note ||
		len(a.Series) != len(b.Series) || !slices.Equal(a.Markers, b.Markers) || !a.Ledger.equal(&b.Ledger) {
		return false
	}
	for i := range a.Series {
		x, y := &a.Series[i], &b.Series[i]
		if x.Name != y.Name || !slices.Equal(x.Cols, y.Cols) || !eqPtr(x.Hold, y.Hold) || !eqPtr(x.Now, y.Now) {
			return false
		}
	}
	return true
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// span is the range of dot rows (0 = top) one column covers.
type span struct {
	Top, Bottom int
	OK          bool
}

// dotRow maps a value to a dot row of a plot dots rows high whose top is maxY.
func dotRow(v uint64, maxY float64, dots int) int {
	if dots <= 1 || maxY <= 0 {
		return max(dots-1, 0)
	}
	r := dots - 1 - int(math.Round(float64(v)/maxY*float64(dots-1)))
	return min(max(r, 0), dots-1)
}

// columnSpans turns aggregated columns into the dot rows to light. Each
// column covers its Min..Max, so a spike shorter than a column still shows
// at its full height; it is stretched to the previous column's Last so the
// line stays connected; a column without samples between two with samples
// holds the previous value (memory is a step function). hold, when known,
// is the value at the window's left edge, held until the first sample.
func columnSpans(cols []store.Column, hold *uint64, maxY float64, dots int) []span {
	return columnSpansInto(nil, cols, hold, maxY, dots)
}

// columnSpansInto is columnSpans into out's array, grown when short: the
// chart draws each series' spans and lets them go, frame after frame.
func columnSpansInto(out []span, cols []store.Column, hold *uint64, maxY float64, dots int) []span {
	out = slices.Grow(out[:0], len(cols))[:len(cols)]
	clear(out)
	lastOK := -1
	for i, c := range cols {
		if c.OK {
			lastOK = i
		}
	}
	if lastOK < 0 {
		return out
	}
	var prev uint64
	have := hold != nil
	if have {
		prev = *hold
	}
	for i, c := range cols[:lastOK+1] {
		switch {
		case c.OK:
			lo, hi := c.Min, c.Max
			if have {
				lo, hi = min(lo, prev), max(hi, prev)
			}
			out[i] = span{Top: dotRow(hi, maxY, dots), Bottom: dotRow(lo, maxY, dots), OK: true}
			prev, have = c.Last, true
		case have:
			r := dotRow(prev, maxY, dots)
			out[i] = span{Top: r, Bottom: r, OK: true}
		}
	}
	return out
}

// seriesMax is the highest value a series shows in the window.
func seriesMax(s *chartSeries) (uint64, bool) {
	var m uint64
	ok := false
	if s.Hold != nil {
		m, ok = *s.Hold, true
	}
	for _, c := range s.Cols {
		if c.OK && (!ok || c.Max > m) {
			m, ok = c.Max, true
		}
	}
	return m, ok
}

// chartModel draws the selected device over the time window: axes and
// labels laid out as ntcharts' linechart lays them out, braille dots for the
// series combined with ntcharts' rune helpers, on a grid of its own.
type chartModel struct {
	styles *Styles
	w, h   int
	data   chartData
	out    string
	dirty  bool
	g      grid
	ansi   map[styleKey][2]string // ANSI before and after text, per style
	spans  []span                 // a series' spans while it is drawn (columnSpansInto)
}

func newChart(st *Styles) chartModel {
	return chartModel{styles: st, dirty: true, ansi: map[styleKey][2]string{}}
}

func (c *chartModel) SetSize(w, h int) {
	if w != c.w || h != c.h {
		c.w, c.h, c.dirty = w, h, true
	}
}

// graphWidth is the plot width in cells.
func (c *chartModel) graphWidth() int { return max(c.w-yLabelW-1, 1) }

// Columns is how many data columns the chart wants (two per cell: braille).
func (c *chartModel) Columns() int { return 2 * c.graphWidth() }

// SetData hands the chart a frame's data; it redraws only when the data
// differs from the last frame's.
func (c *chartModel) SetData(d chartData) {
	if !c.dirty && c.data.equal(&d) {
		return
	}
	c.data, c.dirty = d, true
}

func (c *chartModel) View() string {
	if c.dirty {
		c.out = c.render()
		if strings.Count(c.out, "\n") != c.h-1 {
			c.out = fit(c.out, c.w, c.h) // the short forms (legend only)
		}
		c.dirty = false
	}
	return c.out
}

func (c *chartModel) render() string {
	st := c.styles
	d := &c.data
	legend := c.legend()
	if d.Ledger.On {
		legend = joinLines(ledgerLegendRoom(c.ledgerLegend(), c.h))
	}
	legendH := strings.Count(legend, "\n") + 1
	canvasH := c.h - 1 - legendH // marker labels above, legend below
	markers := true
	if canvasH < 4 && legendH > 1 {
		// a legend of two lines on a short chart: the markers' labels give
		// way (their lines stay), the values stay
		canvasH, markers = canvasH+1, false
	}
	if canvasH < 4 || c.w < yLabelW+8 {
		return legend
	}
	gw, gh := c.graphWidth(), canvasH-2
	var hi uint64
	have := false
	if d.Ledger.On {
		for i := range d.Ledger.Bars {
			if m := stackHeight(&d.Ledger.Bars[i]); !have || m > hi {
				hi, have = m, true
			}
		}
	}
	for i := range d.Series {
		if d.Ledger.On {
			break
		}
		if m, ok := seriesMax(&d.Series[i]); ok && (!have || m > hi) {
			hi, have = m, true
		}
	}
	// n labelled steps of a round size; the axis top (the top row) sits a
	// little above n steps when gh is not a multiple of n
	n := min(4, gh)
	yStep := gh / n
	want := float64(hi) * 1.05
	if !have || hi == 0 {
		want = gib
	}
	div, _ := yUnit(want)
	labelStep := niceCeil(want/float64(n), div)
	maxY := labelStep * float64(n) * float64(gh) / float64(n*yStep)
	win := d.Window.Seconds()
	xStep := max(gw/6, 8)
	xFmt := func(v float64) string { return relTime(v, win) }
	yFmt := func(v float64) string { return axisBytes(v, maxY, labelStep, yLabelW) }
	g := &c.g
	g.reset(c.w, canvasH)
	ox, _ := g.axes(-win, 0, maxY, xStep, yStep, xFmt, yFmt, g.style(st.Axis), g.style(st.AxisLabel))
	x0 := ox + 1

	// markers first: data drawn afterwards stays visible where they cross;
	// one per column (the newest there, an OOM before any other), so a
	// window holding thousands of rows costs no more than one per column
	span := d.To - d.From
	type placed struct {
		x  int
		mk store.Marker
	}
	var marks []placed
	for _, mk := range d.Markers {
		if mk.T < d.From || mk.T >= d.To || span <= 0 {
			continue
		}
		x := int((mk.T - d.From) * int64(gw) / span)
		if n := len(marks); n > 0 && marks[n-1].x == x {
			if marks[n-1].mk.Kind != wire.MarkOOM || mk.Kind == wire.MarkOOM {
				marks[n-1].mk = mk
			}
			continue
		}
		marks = append(marks, placed{x, mk})
	}
	var labels []markLabel
	for _, p := range marks {
		x, mk := p.x, p.mk
		ms := st.markStyle(mk.Kind)
		r := '│'
		switch mk.Kind {
		case wire.MarkOOM:
			r = '┃'
		case "phase_start", "phase_end":
			r = '┆'
		case "ended":
			r = '╎'
		}
		msn := g.style(ms)
		for y := 0; y < gh; y++ {
			g.set(x0+x, y, r, msn)
		}
		labels = append(labels, markLabel{x0 + x, mk.Label, ms})
	}

	dots := gh * 4
	drawn := false
	msg := "no samples in this window"
	if d.Ledger.On {
		drawn = c.drawStacks(g, x0, gw, gh, maxY)
		if d.Ledger.Note != "" {
			msg = d.Ledger.Note
		}
	}
	for i := range d.Series {
		if d.Ledger.On {
			break
		}
		c.spans = columnSpansInto(c.spans, d.Series[i].Cols, d.Series[i].Hold, maxY, dots)
		if c.drawSeries(g, x0, gw, gh, c.spans, g.style(d.Series[i].Style)) {
			drawn = true
		}
	}
	if !drawn {
		msg = truncate(msg, gw)
		g.setString(x0+max((gw-lipgloss.Width(msg))/2, 0), gh/2, msg, g.style(st.Dim))
	}

	// the canvas lines are exactly w cells wide; only the text lines need
	// cutting to the width
	out := c.gridString(g) + "\n" + fit(legend, c.w, legendH)
	if markers {
		out = truncate(markerLine(labels, c.w), c.w) + "\n" + out
	}
	return out
}

// drawSeries lights the braille dots of the spans (two columns and four
// rows of dots per cell) on the grid, cell by cell, combining with the dots
// of series already drawn there.
func (c *chartModel) drawSeries(g *grid, x0, gw, gh int, spans []span, style uint8) bool {
	drawn := false
	for cx := 0; cx < gw && 2*cx+1 < len(spans); cx++ {
		a, b := spans[2*cx], spans[2*cx+1]
		if !a.OK && !b.OK {
			continue
		}
		drawn = true
		top, bot := dotsRange(a, b)
		for cy := top / 4; cy <= bot/4 && cy < gh; cy++ {
			var dots runes.PatternDots
			// braille dot numbers: left column 0,1,2,6, right column 3,4,5,7
			for r, idx := range [4][2]int{{0, 3}, {1, 4}, {2, 5}, {6, 7}} {
				y := cy*4 + r
				dots[idx[0]] = a.OK && a.Top <= y && y <= a.Bottom
				dots[idx[1]] = b.OK && b.Top <= y && y <= b.Bottom
			}
			if r := runes.BraillePatternFromPatternDots(dots); r != runes.BrailleBlockOffset {
				g.braille(x0+cx, cy, r, style)
			}
		}
	}
	return drawn
}

// dotsRange is the union of the dot rows of two spans.
func dotsRange(a, b span) (top, bot int) {
	switch {
	case a.OK && b.OK:
		return min(a.Top, b.Top), max(a.Bottom, b.Bottom)
	case a.OK:
		return a.Top, a.Bottom
	}
	return b.Top, b.Bottom
}
