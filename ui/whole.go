// The whole text: what the panes under the chart say in words (the
// selected process's forecast, then the summary's peaks, forecasts, OOM
// explanation, verdicts, the selected row's details and ledger), wrapped
// to the width and shown whole, in pages, in the place of those panes
// (and of the chart when they do not fit). A pane too short for its text
// cuts it and ends its last line with wholeHint, the key that shows it.

package ui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
)

// wholeHint is the key that shows a pane's text whole.
const wholeHint = "enter: whole text"

// cutLines keeps the first n of lines; when some are left out the last
// line says how many and how to see them (with one line only, it ends
// that line, cut to make room).
func (st *Styles) cutLines(lines []string, n, w int) []string {
	if len(lines) <= n {
		return lines
	}
	if n <= 0 {
		return nil
	}
	if n == 1 {
		hint := " (" + wholeHint + ")"
		line := truncate(lines[0], max(w-lipgloss.Width(hint), 1))
		if line == lines[0] { // not cut itself: it goes on below
			line = truncate(line+" …", max(w-lipgloss.Width(hint), 1))
		}
		return []string{line + st.Dim.Render(hint)}
	}
	out := append([]string(nil), lines[:n-1]...)
	return append(out, st.Dim.Render(truncate(fmt.Sprintf("… %s (%s)", plural(len(lines)-n+1, "more line"), wholeHint), w)))
}

// wholeLines are the text of the panes under the chart, whole.
func (m *Model) wholeLines() []string {
	lines := m.procs.forecastLines()
	lines = append(lines, m.table.tailLines()...)
	if len(lines) == 0 {
		lines = []string{m.styles.Dim.Render("no text under the table at the cursor")}
	}
	return lines
}

// wholePages splits the whole text into pages of at most h lines.
func wholePages(lines []string, h int) [][]string {
	h = max(h, 1)
	var pages [][]string
	for len(lines) > h {
		pages = append(pages, lines[:h])
		lines = lines[h:]
	}
	return append(pages, lines)
}

// wholeTitle is the whole text's first line: how to turn its page or
// leave it.
func (m *Model) wholeTitle() string {
	t := "whole text (enter closes)"
	if m.wholeN > 1 {
		next := "enter: next page"
		if m.wholePage == m.wholeN-1 {
			next = "enter closes"
		}
		t = fmt.Sprintf("whole text %d/%d (%s)", m.wholePage+1, m.wholeN, next)
	}
	return m.styles.TableHeader.Render(t)
}

// toggleWhole opens the whole text, turns its page, or closes it after
// the last; it closes the full help, whose place it takes.
func (m *Model) toggleWhole() {
	switch {
	case !m.wholeOpen:
		m.wholeOpen, m.wholePage = true, 0
		m.help.ShowAll, m.helpPage = false, 0
	case m.wholePage+1 < m.wholeN:
		m.wholePage++
	default:
		m.wholeOpen, m.wholePage = false, 0
	}
}

// layoutWhole lays the whole text out in the rest lines under the chart
// (of chart lines): there when it fits, else the chart gives it lines
// down to chartMinLines, else the chart's lines are its too, in pages.
// It returns the chart's lines and its own.
func (m *Model) layoutWhole(chart, rest int) (int, int) {
	lines := wrapAll(m.wholeLines(), m.w)
	room := chart + rest
	need := 1 + len(lines) // a title line, then the text
	switch {
	case need <= rest: // beside the chart as it is
	case need <= room-chartMinLines:
		chart, rest = room-need, need
	default:
		chart, rest = 0, room
	}
	pages := wholePages(lines, rest-1)
	m.wholeN = len(pages)
	m.wholePage = min(m.wholePage, len(pages)-1)
	m.wholeText = m.wholeTitle() + "\n" + strings.Join(pages[m.wholePage], "\n")
	return chart, rest
}

// wrapAll wraps each line to w cells (the panes wrap theirs already; a
// line cut to a pane's width would lose its end).
func wrapAll(lines []string, w int) []string {
	var out []string
	for _, l := range lines {
		out = append(out, wrapTo(l, w)...)
	}
	return out
}
