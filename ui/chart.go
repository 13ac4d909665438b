package ui

import (
	"image/color"
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
const yLabelW = 6

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
}

func (a *chartData) equal(b *chartData) bool {
	if a.From != b.From || a.To != b.To || a.Window != b.Window || a.Note != b.Note ||
		len(a.Series) != len(b.Series) || !slices.Equal(a.Markers, b.Markers) {
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
	out := make([]span, len(cols))
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
}

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
	canvasH := c.h - 2 // marker labels above, legend below
	if canvasH < 4 || c.w < yLabelW+8 {
		return legend
	}
	gw, gh := c.graphWidth(), canvasH-2
	var hi uint64
	have := false
	for i := range d.Series {
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
	for i := range d.Series {
		if c.drawSeries(g, x0, gw, gh, columnSpans(d.Series[i].Cols, d.Series[i].Hold, maxY, dots), g.style(d.Series[i].Style)) {
			drawn = true
		}
	}
	if !drawn {
		msg := "no samples in this window"
		g.setString(x0+max((gw-len(msg))/2, 0), gh/2, msg, g.style(st.Dim))
	}

	// the canvas lines are exactly w cells wide; only the text lines need
	// cutting to the width
	return truncate(markerLine(labels, c.w), c.w) + "\n" + c.gridString(g) + "\n" + truncate(legend, c.w)
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

// markLabel is a marker's label at a screen column.
type markLabel struct {
	x    int
	text string
	st   lipgloss.Style
}

// markerLine places each marker's label above its line, shortening a label
// that would run into the next one and dropping one with no room at all.
func markerLine(labels []markLabel, w int) string {
	var sb strings.Builder
	col, pos := 0, 0 // first column free for a label (one space after the last); width written
	for i, l := range labels {
		start := max(l.x, col)
		end := w
		if i+1 < len(labels) && labels[i+1].x > start {
			end = min(end, labels[i+1].x-1)
		}
		tw := lipgloss.Width(l.text)
		if end-start < min(tw, 8) {
			// no room on the right (e.g. a snapshot just taken, at the
			// right edge): end the label at its marker instead
			if s2 := max(col, l.x+1-tw); l.x+1-s2 > end-start {
				start, end = s2, l.x+1
			}
		}
		if end-start < 3 {
			continue
		}
		t := truncate(l.text, end-start)
		sb.WriteString(strings.Repeat(" ", start-pos))
		sb.WriteString(l.st.Render(t))
		pos = start + lipgloss.Width(t)
		col = pos + 1
	}
	return sb.String()
}

// legend names each series with its source and, when there is room, its
// value at the cursor; narrower, it groups the torch series under one label.
func (c *chartModel) legend() string {
	st := c.styles
	note := ""
	if c.data.Note != "" {
		note = st.Dim.Render(c.data.Note)
	}
	join := func(parts []string, sep string) string {
		if note != "" {
			parts = append(parts, note)
		}
		return strings.Join(parts, sep)
	}
	var full []string
	for _, s := range c.data.Series {
		p := s.Style.Render("━━") + " " + s.Name
		if s.Now != nil {
			p += " " + st.Bold.Render(humanBytes(*s.Now))
		}
		full = append(full, p)
	}
	if l := join(full, "   "); lipgloss.Width(l) <= c.w {
		return l
	}
	// compact: "━ NVML used (driver)  torch: ━ reserved ━ peak ━ allocated"
	var compact, torch []string
	for _, s := range c.data.Series {
		name, src, ok := strings.Cut(s.Name, " (")
		if ok && src == "torch)" {
			torch = append(torch, s.Style.Render("━")+" "+name)
			continue
		}
		compact = append(compact, s.Style.Render("━")+" "+s.Name)
	}
	if len(torch) > 0 {
		compact = append(compact, "torch: "+strings.Join(torch, " "))
	}
	return join(compact, "  ")
}
