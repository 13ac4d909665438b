package ui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/units"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// dash marks a value whose source is missing; it is never shown as 0.
const dash = summary.Dash

// humanBytes formats bytes with a unit chosen for a short, readable figure.
func humanBytes(b uint64) string { return units.Bytes(b) }

// optHuman formats an optional byte count; absent is a dash.
func optHuman(b *uint64) string {
	if b == nil {
		return dash
	}
	return humanBytes(*b)
}

// signedHuman formats a byte difference with its sign.
func signedHuman(d int64) string {
	if d < 0 {
		return "-" + humanBytes(uint64(-d))
	}
	return "+" + humanBytes(uint64(d))
}

// plural is "1 row", "2 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// percent formats part/total; "" when total is unknown.
func percent(part, total uint64) string {
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(total))
}

// rateString formats an achieved sample rate ("998/s").
func rateString(hz float64) string {
	if hz <= 0 {
		return ""
	}
	if hz < 10 {
		return fmt.Sprintf("%.1f/s", hz)
	}
	return fmt.Sprintf("%.0f/s", hz)
}

// yUnit picks the axis unit for a chart whose top is maxY bytes, written as
// the tables write it.
func yUnit(maxY float64) (div float64, suffix string) {
	if maxY >= gib {
		return gib, " GiB"
	}
	if maxY >= mib {
		return mib, " MiB"
	}
	return kib, " KiB"
}

// axisBytes formats a Y axis value in the unit picked for the chart, with
// as many decimals as the label step needs, right aligned to a fixed width so
// the plot area does not shift between frames.
func axisBytes(v, maxY, step float64, width int) string {
	div, suf := yUnit(maxY)
	dec := 2
	st := step / div
	switch {
	case math.Abs(st-math.Round(st)) < 1e-9:
		dec = 0
	case math.Abs(st*10-math.Round(st*10)) < 1e-9:
		dec = 1
	}
	s := fmt.Sprintf("%.*f%s", dec, v/div, suf)
	if v == 0 {
		s = "0"
	}
	if len(s) < width {
		s = strings.Repeat(" ", width-len(s)) + s
	}
	return s
}

// niceCeil rounds v up to 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a
// power of ten of the unit div, so axis labels are round numbers.
func niceCeil(v, div float64) float64 {
	if v <= 0 {
		return div
	}
	x := v / div
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= x*(1-1e-12) {
			return m * p * div
		}
	}
	return 10 * p * div
}

// relTime formats a time offset in seconds (<= 0, relative to the window's
// right edge) for the X axis, with a precision that suits the window.
func relTime(sec, window float64) string {
	if math.Abs(sec) < 0.5 && window > 5 {
		return "0"
	}
	sign := ""
	if sec < 0 {
		sign, sec = "-", -sec
	}
	switch {
	case window <= 15:
		return fmt.Sprintf("%s%.1fs", sign, sec)
	case window <= 120:
		return fmt.Sprintf("%s%.0fs", sign, sec)
	case window <= 3600:
		s := int(math.Round(sec))
		return fmt.Sprintf("%s%dm%02ds", sign, s/60, s%60)
	}
	m := int(math.Round(sec / 60))
	return fmt.Sprintf("%s%dh%02dm", sign, m/60, m%60)
}

// elapsed formats a duration since the run start as h:mm:ss.d, as the
// summary table's TIME column does.
func elapsed(d time.Duration) string { return summary.Elapsed(d) }

// liveFor is how long a live session has watched, for the title bar, in
// whole minutes ("<1 min", "12 min", "2 h 05 min"; "0 min" before anything
// came).
func liveFor(d time.Duration, started bool) string {
	switch {
	case !started:
		return "0 min"
	case d < time.Minute:
		return "<1 min"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d h %02d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// zoomName names a window length for the title bar.
func zoomName(d time.Duration) string {
	switch {
	case d == 0:
		return "whole run"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh", int(d/time.Hour))
}

// speedName formats a replay speed factor.
func speedName(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0fx", f)
	}
	return fmt.Sprintf("%gx", f)
}

// fit cuts s to exactly h lines, none wider than w cells, so a pane can
// never push the rest of the screen around.
func fit(s string, w, h int) string {
	if h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// truncate cuts plain or styled text to w cells with an ellipsis.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// padRight pads styled text to w cells.
func padRight(s string, w int) string {
	if n := w - ansi.StringWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}
