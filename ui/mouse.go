// The mouse: a click selects a process or a row (and focuses its
// pane), the wheel zooms the chart and scrolls the pane under it, or the
// focused one.

package ui

import (
	"time"

	tea "charm.land/bubbletea/v2"
)

// span is the screen lines [top, top+h) a pane was drawn on.
type paneSpan struct{ top, h int }

func (s paneSpan) has(y int) bool { return y >= s.top && y < s.top+s.h }

// paneGeo is where the last drawn screen put the panes that take the mouse.
type paneGeo struct{ chart, procs, table paneSpan }

// record notes the panes' lines from the layout draw stacks: the title
// bar, the header, the chart, the processes, the summary.
func (g *paneGeo) record(l layout) {
	y := 1 + l.header
	g.chart = paneSpan{y, l.chart}
	y += l.chart
	g.procs = paneSpan{y, l.procs}
	y += l.procs
	g.table = paneSpan{y, l.table}
}

// mouse handles a click or a wheel turn.
func (m *Model) mouse(msg tea.MouseMsg) {
	if m.tooSmall() || m.prompt.open {
		return
	}
	ev := msg.Mouse()
	g := m.geo
	switch msg.(type) {
	case tea.MouseClickMsg:
		if ev.Button != tea.MouseLeft {
			return
		}
		// a pane's first line is its header; its rows follow
		switch {
		case g.procs.has(ev.Y) && ev.Y > g.procs.top:
			if i := m.procs.drawn.first + ev.Y - g.procs.top - 1; ev.Y-g.procs.top-1 < m.procs.drawn.n && i < len(m.procs.rows) {
				m.procs.sel, m.procs.chosen = m.procs.rows[i].PID, true
				if m.focus == focusRows {
					m.table.Unselect()
				}
				m.focus = focusProcs
			}
		case g.table.has(ev.Y) && ev.Y > g.table.top:
			if i := m.table.drawn.first + ev.Y - g.table.top - 1; ev.Y-g.table.top-1 < m.table.drawn.n && i < len(m.table.d.Dev.Rows) {
				m.table.sel = i
				m.focus = focusRows
			}
		}
	case tea.MouseWheelMsg:
		delta := 0
		switch ev.Button {
		case tea.MouseWheelUp:
			delta = -1
		case tea.MouseWheelDown:
			delta = 1
		default:
			return
		}
		now := m.now()
		switch {
		case g.chart.has(ev.Y):
			run := m.tl.cursor(now) - m.st.Start()
			if delta < 0 {
				m.tl.zoomIn(time.Duration(run))
			} else {
				m.tl.zoomOut(time.Duration(run))
			}
		case g.procs.has(ev.Y):
			if m.focus == focusRows {
				m.table.Unselect()
			}
			m.focus = focusProcs
			m.moveFocused(delta)
		case g.table.has(ev.Y) && len(m.table.d.Dev.Rows) > 0:
			if m.focus != focusRows {
				m.switchFocus()
			} else {
				m.moveFocused(delta)
			}
		default:
			m.moveFocused(delta)
		}
	}
	m.markFocus()
	m.layout()
}
