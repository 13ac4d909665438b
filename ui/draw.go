// Drawing the screen: the layout of the panes, the title bar, and the frame
// drawn again only when something on it changed.

package ui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

type frameCache struct {
	version int
	out     string
	ok      bool
}

// titleKey is what the title bar depends on, cheap to compare at every
// tick: the clock it shows changes once a second live and ten times a
// second in replay, so most ticks need not format it again.
type titleKey struct {
	unit, total       int64
	zoom, speed, w    int
	paused, hasSource bool
}

func (m *Model) titleKey() titleKey {
	k := titleKey{zoom: m.tl.zoom, speed: m.tl.speed, w: m.w, paused: m.tl.paused}
	start := m.st.Start()
	if start == 0 {
		return k
	}
	k.hasSource = true
	unit := int64(100 * time.Millisecond)
	if !m.opt.Replay && !m.tl.paused {
		unit = int64(time.Second)
	}
	k.unit = max(m.tl.cursor(m.now())-start, 0) / unit
	if m.opt.Replay {
		k.total = max(m.st.End()-start, 0) / int64(100*time.Millisecond)
	}
	return k
}

// prerender draws the chart now if its data changed, so the drawing is
// kept in the model Update returns (View works on a copy and cannot cache).
func (m *Model) prerender() {
	if m.w >= MinWidth && m.h >= MinHeight {
		m.chart.View()
	}
}

// heights of the panes, top to bottom
type layout struct {
	header, chart, procs, table, holders, dump, help int
}

// layout shares the screen height: the chart gets at least 45%, the
// process pane and the summary what they need, the chart the rest.
func (m *Model) layout() layout {
	var l layout
	if m.w < MinWidth || m.h < MinHeight {
		return l
	}
	l.help = 1
	if m.help.ShowAll && !m.prompt.open {
		l.help = min(max(lipgloss.Height(m.help.View(m.keys)), 1), m.h/2)
	}
	l.header = min(m.header.Lines(), max((m.h-4)/6, 1))
	remain := max(m.h-2-l.header-l.help, 0) // minus the title bar and the status line
	// the chart first (at least the 7 lines it needs to be a chart), then
	// what the holders, processes and summary want, the rest to the chart
	l.chart = min(max(remain*9/20, 7), remain)
	rest := remain - l.chart
	if m.showHolders {
		l.holders = min(m.holders.Lines(), max(rest/2, min(3, rest)))
		rest -= l.holders
	}
	if m.showDump {
		l.dump = min(m.dump.Lines(), max(rest/2, min(3, rest)))
		rest -= l.dump
	}
	l.procs = min(m.procs.Lines(), 7, max(rest/3, min(2, rest)))
	rest -= l.procs
	l.table = min(m.table.Lines(), rest)
	rest -= l.table
	l.chart += rest
	m.header.SetSize(m.w, l.header)
	m.chart.SetSize(m.w, l.chart)
	m.procs.SetSize(m.w, l.procs)
	m.table.SetSize(m.w, l.table)
	m.holders.SetSize(m.w, l.holders)
	m.dump.SetSize(m.w, l.dump)
	m.prompt.SetSize(m.w, 1)
	m.status.SetSize(m.w, 1)
	return l
}

// View draws the screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.content())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion // clicks select, the wheel scrolls and zooms (mouse.go)
	v.WindowTitle = "gputop"
	if m.opt.Title != "" {
		v.WindowTitle += ": " + m.opt.Title
	}
	return v
}

// content is the screen, drawn again only when version moved (the cache is
// shared by the copies of the model, so View on a copy still uses it).
func (m Model) content() string {
	if m.frame.ok && m.frame.version == m.version {
		return m.frame.out
	}
	out := m.draw()
	*m.frame = frameCache{version: m.version, out: out, ok: true}
	return out
}

func (m Model) draw() string {
	if m.w == 0 || m.h == 0 {
		return ""
	}
	if m.w < MinWidth || m.h < MinHeight {
		msg := fmt.Sprintf("terminal too small (%dx%d); gputop needs at least %dx%d", m.w, m.h, MinWidth, MinHeight)
		return fit(lipgloss.NewStyle().Width(m.w).Render(msg), m.w, m.h)
	}
	l := m.layout()
	m.geo.record(l)
	parts := []string{m.title, m.header.View(), m.chart.View()}
	if l.procs > 0 {
		parts = append(parts, m.procs.View())
	}
	if l.table > 0 {
		parts = append(parts, m.table.View())
	}
	if l.holders > 0 {
		parts = append(parts, m.holders.View())
	}
	if l.dump > 0 {
		parts = append(parts, m.dump.View())
	}
	if m.prompt.open {
		parts = append(parts, m.prompt.View())
	} else {
		parts = append(parts, m.status.View())
	}
	if m.prompt.open {
		parts = append(parts, m.help.ShortHelpView(promptKeys{*m.keys}.ShortHelp()))
	} else {
		parts = append(parts, fit(m.help.View(m.keys), m.w, l.help))
	}
	// every pane is already cut to its box; only the line count is checked
	// here (measuring every line's width again costs more than the rest)
	out := strings.Join(parts, "\n")
	if n := strings.Count(out, "\n") + 1; n != m.h {
		out = fit(out, m.w, m.h)
	}
	return out
}

// titleBar names the source and says where the window is: live, paused or
// the replay cursor, its speed and the zoom.
func (m *Model) titleBar() string {
	st := m.styles
	now := m.now()
	start := m.st.Start()
	cur := elapsed(0)
	if start != 0 {
		cur = elapsed(time.Duration(m.tl.cursor(now) - start))
	}
	var mode string
	switch {
	case m.opt.Replay:
		state := "▶ " + speedName(speeds[m.tl.speed])
		if m.tl.paused {
			state = "❚❚ paused"
		}
		total := elapsed(0)
		if start != 0 {
			total = elapsed(time.Duration(m.st.End() - start))
		}
		mode = fmt.Sprintf("replay %s  cursor %s / %s", state, cur, total)
	case m.tl.paused:
		mode = "❚❚ paused at " + cur + " (end: live)"
	default:
		// whole seconds: a clock in tenths would redraw the screen 10 times
		// a second on its own
		mode = "● live " + strings.TrimSuffix(cur, cur[strings.LastIndex(cur, "."):])
	}
	info := mode + "  window " + zoomName(zooms[m.tl.zoom])
	if len([]rune(info)) > m.w-10 {
		info = strings.NewReplacer("replay ", "", "cursor ", "", "  window ", " ", " (end: live)", "").Replace(info)
	}
	right := st.TitleInfo.Render(truncate(info, max(m.w-8, 1)))
	left := st.Title.Render("gputop")
	if m.opt.Title != "" {
		left += " " + st.Bold.Render(m.opt.Title)
	}
	gap := m.w - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 1 {
		left = truncate(left, max(m.w-lipgloss.Width(right)-1, 6))
		gap = max(m.w-lipgloss.Width(left)-lipgloss.Width(right), 1)
	}
	return truncate(left+strings.Repeat(" ", gap)+right, m.w)
}
