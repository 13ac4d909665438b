// Drawing the screen: the layout of the panes, the title bar, and the frame
// drawn again only when something on it changed.

package ui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/summary"
)

type frameCache struct {
	version int
	out     string
	ok      bool
}

// titleKey is what the title bar depends on, cheap to compare at every
// tick: the clock it shows changes once a minute live and ten times a
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
		unit = int64(time.Minute)
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

// heights of the panes, top to bottom; help is the full help (?), which
// takes the place of the panes under the chart
type layout struct {
	header, chart, procs, table, holders, dump, help, whole int
}

// layout shares the screen height: the title bar, the device header (a
// sixth of the screen at most), the chart (at least 45%), the process pane
// and the summary what they need unless hidden, the chart the rest, then
// the status line and the key bar. With the help open, the help takes the
// lower panes' place, and the chart's too when the two do not fit.
func (m *Model) layout() layout {
	var l layout
	if m.w < MinWidth || m.h < MinHeight {
		return l
	}
	l.header = min(m.header.Lines(), max((m.h-4)/6, 1))
	remain := max(m.h-3-l.header, 0) // minus the title bar, the status line and the key bar
	if m.helpOpen() {
		pages := m.bars.helpPages(m, max(remain-1, 1))
		need := 1 + strings.Count(pages[0], "\n") + 1 // a title line, then the page
		l.chart = remain - need
		if l.chart < chartMinLines {
			l.chart = 0 // too short for both: the help alone
		}
		l.help = remain - l.chart
		m.helpN = len(pages)
		m.helpPage = min(m.helpPage, len(pages)-1)
		m.helpText = m.helpTitle() + "\n" + pages[m.helpPage]
	} else {
		// the chart first (at least the lines it needs to be a chart),
		// then what the holders, processes and summary want, the rest to
		// the chart
		l.chart = min(max(remain*9/20, chartMinLines), remain)
		rest := remain - l.chart
		if m.showHolders {
			l.holders = min(m.holders.Lines(), max(rest/2, min(3, rest)))
			rest -= l.holders
		}
		if m.showDump {
			l.dump = min(m.dump.Lines(), max(rest/2, min(3, rest)))
			rest -= l.dump
		}
		switch {
		case m.wholeOpen && !m.prompt.open:
			// the whole text in the place of the process pane and the
			// summary, whose text it is (whole.go)
			l.chart, l.whole = m.layoutWhole(l.chart, rest)
			rest = 0
		default:
			if !m.hidden[paneProcs] {
				l.procs = min(m.procs.Lines(), 7, max(rest/3, min(2, rest)))
				rest -= l.procs
			}
			if !m.hidden[paneTable] {
				l.table = min(m.table.Lines(), rest)
				rest -= l.table
				l.chart, l.table = m.giveSelected(l.chart, l.table)
			}
		}
		l.chart += rest
	}
	// each by name: a pane taken as an interface here would move the
	// model, copied at every Update, to the heap
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

// giveSelected gives the summary the lines the selected row's verdict
// needs whole, when the pane is short of them, from the chart down to its
// least (the process pane keeps its lines: it cuts its notes only saying
// so). It returns the chart's lines and the summary's.
func (m *Model) giveSelected(chart, table int) (int, int) {
	c := min(max(m.table.SelectedLines()-table, 0), max(chart-chartMinLines, 0))
	return chart - c, table + c
}

// helpOpen is true while the full help takes the lower panes' place.
func (m *Model) helpOpen() bool { return m.help.ShowAll && !m.prompt.open }

// helpTitle is the full help's first line: how to leave it, or turn its
// page, and where it fits what the process pane's fragmentation is.
func (m *Model) helpTitle() string {
	t := "keys (? closes)"
	if m.helpN > 1 {
		t = fmt.Sprintf("keys, page %d of %d (? %s)", m.helpPage+1, m.helpN, map[bool]string{true: "closes", false: "next page"}[m.helpPage == m.helpN-1])
	}
	title := m.styles.TableHeader.Render(t)
	if f := "   " + summary.FragmentationFormula; lipgloss.Width(t+f) <= m.w {
		title += m.styles.Dim.Render(f)
	}
	return title
}

// toggleHelp opens the help, turns its page, or closes it after the last.
func (m *Model) toggleHelp() {
	switch {
	case !m.help.ShowAll:
		m.help.ShowAll, m.helpPage = true, 0
		m.wholeOpen, m.wholePage = false, 0 // the help takes its place
	case m.helpPage+1 < m.helpN:
		m.helpPage++
	default:
		m.help.ShowAll, m.helpPage = false, 0
	}
}

// keyBarLine is the last line: the keys that matter most that fit, and
// always help and quit; with the prompt open, its own keys first (? and q
// are text there until it is closed).
func (m *Model) keyBarLine() string {
	k := barKey{w: m.w, mode: m.keyMode(), hidden: m.hidden}
	if m.bars.barOK && m.bars.bar == k {
		return m.bars.barOut
	}
	out := m.drawKeyBar()
	m.bars.bar, m.bars.barOut, m.bars.barOK = k, out, true
	return out
}

// barCache keeps the key bar and the help's pages for the size and the
// state they were laid out for: they change with the size or a key, not
// from frame to frame.
type barCache struct {
	bar       barKey
	barOut    string
	barOK     bool
	help      barKey
	helpH     int
	helpOut   []string
	helpReady bool
}

// barKey is what the key bar and the help's layout depend on.
type barKey struct {
	w      int
	mode   keyMode        // the prompt's keys are its mode's
	hidden [numPanes]bool // the 1 and 2 keys' help says show or hide
}

func (c *barCache) helpPages(m *Model, maxH int) []string {
	k := barKey{w: m.w, hidden: m.hidden}
	if !c.helpReady || c.help != k || c.helpH != maxH {
		c.help, c.helpH, c.helpReady = k, maxH, true
		c.helpOut = helpPages(m.help.Styles, m.keys.FullHelp(), m.w, maxH)
	}
	return c.helpOut
}

// drawKeyBar draws the key bar of the mode keys act in. The prompt's bar
// is its keys (confirm, then cancel), "then" and the screen's help and
// quit; too narrow for that, cancel's words give way to "then".
func (m *Model) drawKeyBar() string {
	st := m.help.Styles
	mode := m.keyMode()
	if mode&inPrompt == 0 {
		return keyBar(st, m.keys.ShortHelp(), m.keys.Always(), m.w)
	}
	always := keyBar(st, nil, m.keys.Always(), m.w)
	item := func(k, desc string) string { return st.ShortKey.Render(k) + " " + st.ShortDesc.Render(desc) }
	sep := st.ShortSeparator.Render(keySep)
	var head string
	acts := m.keys.bar(mode)
	for _, b := range acts[:len(acts)-1] {
		head += item(b.Help().Key, b.Help().Desc) + sep
	}
	last := acts[len(acts)-1].Help()
	bar := head + item(last.Key, last.Desc) + sep + st.ShortDesc.Render("then ") + always
	if lipgloss.Width(bar) > m.w {
		bar = head + item(last.Key, "then") + " " + always
	}
	return truncate(bar, m.w)
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

// redraw draws the screen after a tick found new data, and makes it a frame
// only when its text differs from the last one: new samples of a flat
// series, a rate that moved by a sample, a window that slid over the same
// values draw the same text, and the terminal is left alone.
func (m *Model) redraw() {
	out := m.draw()
	if m.frame.ok && out == m.frame.out {
		return
	}
	m.version++
	m.stats.Frames++
	*m.frame = frameCache{version: m.version, out: out, ok: true}
}

// content is the screen, drawn again only when version moved (the cache is
// shared by the copies of the model, so View on a copy still uses it).
func (m Model) content() string {
	if m.frame.ok && m.frame.version == m.version {
		return m.frame.out
	}
	out := m.draw()
	m.stats.Frames++
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
	m.geo.record(l) // with the help open, the panes under the chart have no lines
	parts := []string{m.title, m.header.View()}
	if l.chart > 0 {
		parts = append(parts, m.chart.View())
	}
	if l.help > 0 {
		parts = append(parts, fit(m.helpText, m.w, l.help))
	}
	if l.whole > 0 {
		parts = append(parts, fit(m.wholeText, m.w, l.whole))
	}
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
	switch {
	case m.prompt.open:
		parts = append(parts, m.prompt.View())
	case m.status.text == "" && l.table <= 1 && m.table.Lines() > l.table && l.help == 0 && l.whole == 0 && !m.hidden[paneTable]:
		// no room for the summary at this size: where its text is
		parts = append(parts, m.styles.Dim.Render(truncate("summary: no room; "+wholeHint, m.w)))
	default:
		parts = append(parts, m.status.View())
	}
	parts = append(parts, m.keyBarLine())
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
	// where the window is, in shorter and shorter forms: the run's times
	// are what the others give way to (the window's name, then the
	// state's word)
	window := zoomName(zooms[m.tl.zoom])
	var forms []string
	switch {
	case m.opt.Replay:
		state, word := "▶ "+speedName(speeds[m.tl.speed]), ""
		if m.tl.paused {
			state, word = "❚❚", " paused"
		}
		total := elapsed(0)
		if start != 0 {
			total = elapsed(time.Duration(m.st.End() - start))
		}
		times := cur + " / " + total
		forms = []string{"replay " + state + word + "  cursor " + times + "  window " + window,
			state + word + "  " + times + " " + window, state + word + " " + times, state + " " + times}
	case m.tl.paused:
		forms = []string{"❚❚ paused at " + cur + " (end: live)  window " + window,
			"❚❚ paused at " + cur + " " + window, "❚❚ paused at " + cur, "❚❚ " + cur}
	default:
		// how long gputop has watched, in whole minutes: the chart says
		// when things happened, and a clock in seconds would redraw a
		// screen whose figures are still once a second on its own
		live := liveFor(time.Duration(m.tl.cursor(now)-start), start != 0)
		forms = []string{"● live " + live + "  window " + window, "● live " + live + " " + window, "● live " + live, "● " + live}
	}
	// the long form where it leaves the source's name 20 cells, else the
	// first of the others that leaves "gputop" whole beside it
	brand := st.Title.Render("gputop")
	info := forms[0]
	if len([]rune(info)) > m.w-10 || m.opt.Title != "" && len([]rune(info)) > m.w-10-min(len([]rune(m.opt.Title))+1, 20) {
		room := m.w - lipgloss.Width(brand) - 1
		for _, f := range forms[1:] {
			if info = f; lipgloss.Width(f) <= room {
				break
			}
		}
	}
	right := st.TitleInfo.Render(truncate(info, max(m.w-8, 1)))
	left := brand
	if m.opt.Title != "" {
		left += " " + st.Bold.Render(m.opt.Title)
	}
	gap := m.w - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 1 {
		// the source's name cut, or left out where a few cells of it
		// would be all
		room := m.w - lipgloss.Width(right) - 1
		if room < lipgloss.Width(brand)+6 {
			left = brand
		}
		left = truncate(left, max(room, 6))
		gap = max(m.w-lipgloss.Width(left)-lipgloss.Width(right), 1)
	}
	return truncate(left+strings.Repeat(" ", gap)+right, m.w)
}
