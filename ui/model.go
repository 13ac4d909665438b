// Package ui is gputop's terminal interface: a Bubble Tea v2 program that
// redraws from the store at a frame rate (never one message per sample).
// The root Model owns the layout and the keys; each pane (header, chart,
// processes, snapshot table, holders, prompt, status) lives in its own file
// with its own SetSize and View.
package ui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options configure the UI; main.go fills them.
type Options struct {
	Replay         bool                    // the store holds a whole recording; the UI plays it with a cursor
	Title          string                  // e.g. "demo: H200 MLP training" or the recording path
	CSVPath        string                  // --csv; "" means ./gputop-summary-YYYYmmdd-HHMMSS.csv on e
	FPS            int                     // frame ticks per second (default 30): new rows, markers, replay motion; value-only changes redraw at most every 100 ms
	Now            func() time.Time        // clock; default time.Now
	RequestHolders func(pid int) error     // asks an agent for a holders report; nil when there is no agent server
	WriteCSV       func(path string) error // writes the summary CSV (e, and quit with CSVPath)
	LoadErr        string                  // e.g. a recording's format error, shown at start
}

// Minimum usable terminal; below it the UI shows a notice instead.
const (
	MinWidth  = 40
	MinHeight = 10
)

type tickMsg time.Time

// csvMsg reports an export.
type csvMsg struct {
	path     string
	rows     int
	err      error
	quitting bool
}

// holdersAskedMsg reports whether a holders request reached the agent.
type holdersAskedMsg struct {
	pid int
	err error
}

// peakCache extends a run peak with only the samples added since the last
// frame, instead of scanning the whole run each frame.
type peakCache struct {
	key      store.Key
	from, to int64
	v        uint64
	ok       bool
}

func (p *peakCache) get(st *store.Store, k store.Key, from, to int64) (uint64, bool) {
	if p.key != k || p.from != from || to < p.to {
		*p = peakCache{key: k, from: from, to: from}
	}
	if to > p.to {
		if v, ok := st.Max(k, p.to, to); ok && (!p.ok || v > p.v) {
			p.v, p.ok = v, true
		}
		p.to = to
	}
	return p.v, p.ok
}

// Model is the root Bubble Tea model.
type Model struct {
	st     *store.Store
	opt    Options
	keys   *KeyMap
	styles *Styles
	help   help.Model

	w, h int
	tl   timeline
	dev  int

	header  headerModel
	chart   chartModel
	procs   procsModel
	table   tableModel
	holders holdersModel
	prompt  promptModel
	status  statusModel

	showHolders bool
	quitArmed   bool // a write on quit failed; the next quit key quits anyway
	promptEnd   bool // the open prompt takes an end row (c), not a snapshot (s)
	rows        *rowsCache

	// what the last refresh was computed from, to skip identical frames
	lastGen          uint64
	lastFrom, lastTo int64
	lastShape        store.Shape
	valuesAt         int64 // when values were last redrawn
	nvmlPeak         peakCache
	torchPeaks       map[int]*peakCache
	nRows            int

	// the screen is drawn again only when version moved: a frame where
	// nothing changed costs no drawing at all
	version int
	title   string
	titleK  titleKey // what title was made from
	frame   *frameCache
}

type frameCache struct {
	version int
	out     string
	ok      bool
}

// New returns the root model over st.
func New(st *store.Store, opt Options) Model {
	if opt.FPS <= 0 {
		opt.FPS = 30
	}
	// a recording's file name goes into the window title and the title bar,
	// a load error quotes it: printable like everything else from outside
	opt.Title, opt.LoadErr = printable.Clean(opt.Title), printable.Clean(opt.LoadErr)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	styles := DefaultStyles()
	keys := DefaultKeyMap(opt.Replay)
	h := help.New()
	h.Styles = styles.Help
	m := Model{
		st: st, opt: opt, keys: &keys, styles: &styles, help: h,
		tl:         newTimeline(opt.Replay, st.Start(), opt.Now().UnixNano()),
		header:     newHeader(&styles),
		chart:      newChart(&styles),
		procs:      newProcs(&styles, &keys),
		table:      newTable(&styles),
		holders:    newHolders(&styles),
		prompt:     newPrompt(&styles, &keys),
		status:     newStatus(&styles),
		torchPeaks: map[int]*peakCache{},
		frame:      &frameCache{},
		rows:       &rowsCache{},
	}
	m.status.SetLogs(st.Logs())
	if opt.LoadErr != "" {
		m.status.Set(opt.LoadErr, true)
	}
	return m
}

func (m *Model) now() int64 { return m.opt.Now().UnixNano() }

func (m Model) tick() tea.Cmd {
	return tea.Tick(time.Second/time.Duration(m.opt.FPS), func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Init starts the frame ticker.
func (m Model) Init() tea.Cmd { return m.tick() }

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(tickMsg); ok {
		m.tl.advance(m.now(), m.st.End())
		k := m.titleKey()
		// live, a new second on the clock redraws the values with it: one
		// full-screen frame instead of two
		changed := m.refresh(k != m.titleK && !m.opt.Replay)
		m.prerender()
		if k != m.titleK {
			m.titleK = k
			if title := m.titleBar(); title != m.title {
				m.title = title
				changed = true
			}
		}
		if changed {
			m.version++
		}
		return m, m.tick()
	}
	nm, cmd := m.update(msg)
	nm.titleK = nm.titleKey()
	nm.title = nm.titleBar()
	nm.version++
	return nm, cmd
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

func (m Model) update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.help.SetWidth(m.w)
		m.layout()
		m.refresh(true)
		m.prerender()
		return m, nil
	case csvMsg:
		if msg.err != nil {
			text := msg.err.Error() + " (every snapshot is still here; try --csv with a writable path)"
			if msg.quitting {
				m.quitArmed = true
				text += "; press q again to quit without writing"
			}
			m.status.Set(text, true)
			return m, nil
		}
		m.status.Set(fmt.Sprintf("wrote %s (%d rows)", msg.path, msg.rows), false)
		if msg.quitting {
			return m, tea.Quit
		}
		return m, nil
	case holdersAskedMsg:
		if msg.err != nil {
			m.holders.asking = 0
			m.status.Set(fmt.Sprintf("cannot ask pid %d for holders: %v", msg.pid, msg.err), true)
		}
		return m, nil
	case tea.KeyPressMsg:
		cmd := m.key(msg)
		m.refresh(true)
		m.prerender()
		return m, cmd
	}
	if m.prompt.open && !m.tooSmall() {
		var cmd tea.Cmd
		m.prompt, cmd = m.prompt.Update(msg)
		return m, cmd
	}
	return m, nil
}

// tooSmall is true while the screen only says it is too small.
func (m *Model) tooSmall() bool { return m.w < MinWidth || m.h < MinHeight }

// key handles a key press; the caller redraws at once afterwards.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	if m.tooSmall() {
		// nothing on screen to act on, not even an open prompt: only
		// quitting works
		if key.Matches(k, m.keys.Quit) {
			m.prompt.close()
			return m.quit()
		}
		return nil
	}
	if m.prompt.open {
		if k.String() == "ctrl+c" {
			m.prompt.close()
			return m.quit()
		}
		var cmd tea.Cmd
		m.prompt, cmd = m.prompt.Update(k)
		if label, ok := m.prompt.Take(); ok {
			var end *bool
			if m.promptEnd {
				end = &m.promptEnd
			}
			m.takeSnapshot(label, end)
		}
		m.layout()
		return cmd
	}
	now := m.now()
	start, last := m.st.Start(), m.st.End()
	switch {
	case key.Matches(k, m.keys.Quit):
		return m.quit()
	case key.Matches(k, m.keys.Help):
		m.help.ShowAll = !m.help.ShowAll
	case key.Matches(k, m.keys.Snapshot):
		if len(m.st.Devices()) == 0 {
			m.status.Set("no GPU known yet: nothing to snapshot", true)
			return nil
		}
		m.promptEnd = false
		cmd := m.prompt.Open(fmt.Sprintf("snapshot %d", m.nRows+1))
		m.layout()
		return cmd
	case key.Matches(k, m.keys.EndRow):
		if len(m.st.Devices()) == 0 {
			m.status.Set("no GPU known yet: nothing to check", true)
			return nil
		}
		m.promptEnd = true
		cmd := m.prompt.Open("After cleanup")
		m.layout()
		return cmd
	case key.Matches(k, m.keys.RowUp):
		m.table.Move(-1)
	case key.Matches(k, m.keys.RowDown):
		m.table.Move(1)
	case key.Matches(k, m.keys.Export):
		path := m.opt.CSVPath
		if path == "" {
			path = snapshot.DefaultCSVPath(m.opt.Now())
		}
		return m.export(path, false)
	case key.Matches(k, m.keys.Holders):
		return m.toggleHolders(now)
	case key.Matches(k, m.keys.Up, m.keys.Down):
		m.procs, _ = m.procs.Update(k)
	case key.Matches(k, m.keys.NextDevice):
		if n := len(m.st.Devices()); n > 0 {
			m.dev = (m.dev + 1) % n
		}
	case key.Matches(k, m.keys.PrevDevice):
		if n := len(m.st.Devices()); n > 0 {
			m.dev = (m.dev - 1 + n) % n
		}
	case key.Matches(k, m.keys.ZoomIn):
		m.tl.zoomIn(time.Duration(m.tl.cursor(now) - start))
	case key.Matches(k, m.keys.ZoomOut):
		m.tl.zoomOut(time.Duration(m.tl.cursor(now) - start))
	case key.Matches(k, m.keys.Pause):
		m.tl.togglePause(now, start, last)
	case key.Matches(k, m.keys.Back):
		m.tl.seek(-0.1, now, start, last)
	case key.Matches(k, m.keys.Forward):
		m.tl.seek(0.1, now, start, last)
	case key.Matches(k, m.keys.Start):
		m.tl.home(now, start, last)
	case key.Matches(k, m.keys.End):
		m.tl.toEnd(now, last)
	case key.Matches(k, m.keys.Slower):
		m.tl.slower()
	case key.Matches(k, m.keys.Faster):
		m.tl.faster()
	}
	m.layout()
	return nil
}

// quit writes the CSV first when --csv was given; if that fails the UI
// stays, says why, and a second quit key leaves without writing.
func (m *Model) quit() tea.Cmd {
	if m.opt.CSVPath != "" && m.opt.WriteCSV != nil && !m.quitArmed {
		return m.export(m.opt.CSVPath, true)
	}
	return tea.Quit
}

func (m *Model) export(path string, quitting bool) tea.Cmd {
	if m.opt.WriteCSV == nil {
		m.status.Set("CSV export is not available here", true)
		if quitting {
			return tea.Quit
		}
		return nil
	}
	write, st := m.opt.WriteCSV, m.st
	return func() tea.Msg {
		n := len(st.Snapshots())
		return csvMsg{path: path, rows: n, err: write(path), quitting: quitting}
	}
}

// takeSnapshot records the rows of the selected device at now (live) or at
// the replay cursor: one per agent process there (see store.TakeSnapshot).
// end, when set, says whether they end a run (else the label decides).
func (m *Model) takeSnapshot(label string, end *bool) {
	t := m.now()
	if m.opt.Replay {
		t = m.tl.cursor(t)
	}
	rows := m.st.TakeSnapshot(label, m.dev, t, "key", end)
	what := "snapshot"
	if len(rows) > 0 && rows[0].End {
		what = "end row"
	}
	m.status.Set(fmt.Sprintf("%s %q on GPU %d", what, store.CleanText(label), m.dev), false)
	m.table.Unselect()
}

// toggleHolders opens the holders pane (asking the selected process for a
// fresh report when it can be asked) or closes it.
func (m *Model) toggleHolders(now int64) tea.Cmd {
	if m.showHolders {
		m.showHolders = false
		m.layout()
		return nil
	}
	m.showHolders = true
	defer m.layout()
	r, ok := m.procs.Selected()
	if !ok || !r.Agent || r.Ended || m.opt.RequestHolders == nil {
		return nil
	}
	m.holders.Ask(r.PID, r.Holders, now)
	ask, pid := m.opt.RequestHolders, r.PID
	return func() tea.Msg { return holdersAskedMsg{pid: pid, err: ask(pid)} }
}

// holdersNote explains why the holders pane has no report.
func (m *Model) holdersNote(r procRow, ok bool) string {
	switch {
	case !ok:
		return "no process selected"
	case !r.Agent:
		return fmt.Sprintf("pid %d has no agent: holders need gputop.attach() inside that process", r.PID)
	case m.opt.Replay:
		return "no holders report in this recording up to the cursor"
	case r.Ended:
		return fmt.Sprintf("pid %d is gone; no report was taken while it ran", r.PID)
	case m.opt.RequestHolders == nil:
		return "holders can only be asked through the agent socket (--source agent or all)"
	}
	return "press h to close; h again asks for a fresh report"
}

// valueInterval is the shortest time between two redraws caused only by new
// values (samples at up to 1 kHz, a moving window): a sixtieth of the
// window, between minValueInterval and maxValueInterval, so the chart moves
// about as far at each redraw at every zoom (a second at the default one
// minute). Numbers that change 30 times a second cannot be read anyway, and
// each distinct frame costs the terminal renderer a full-screen pass; what
// changes the screen's shape (a snapshot row, a marker, a log line, an
// agent coming or going, a holders report) and every key are drawn at the
// next tick or at once. Live, the values are also redrawn with each new
// second of the clock. On the H200 each value redraw per second cost about
// 0.4% of a core (builds differing only in this interval, beside a training
// job); spikes are not lost at any rate, since each column keeps the max of
// its samples.
func (m *Model) valueInterval(now, start int64) time.Duration {
	return min(max(m.tl.windowLen(now, start)/60, minValueInterval), maxValueInterval)
}

const (
	minValueInterval = 250 * time.Millisecond
	maxValueInterval = time.Second
)

// shape is the store's Shape; in replay, snapshots and markers count only
// up to the cursor, as rows and markers appear when the cursor passes them.
func (m *Model) shape() store.Shape {
	sh := m.st.Shape()
	if m.opt.Replay {
		cursor := m.tl.cursor(m.now())
		sh.Snapshots, sh.Markers = m.st.CountSnapshots(cursor), m.st.CountMarkers(cursor)
	}
	return sh
}

// refresh recomputes the panes' data from the store. Frames where neither
// the store nor the window changed are skipped, and so are value-only
// changes within valueInterval of the last redraw, unless forced (keys,
// resize). It reports whether anything on screen may have changed.
func (m *Model) refresh(force bool) bool {
	if m.w == 0 {
		return false
	}
	st := m.st
	now := m.now()
	start := st.Start()
	if m.opt.Replay && m.tl.end < start {
		m.tl.end = start
	}
	from, to := m.tl.window(now, start, m.chart.Columns())
	gen := st.Gen()
	if !force && gen == m.lastGen && from == m.lastFrom && to == m.lastTo {
		late := m.holders.late()
		m.holders.now = now // a wait turns into "no answer" by the clock alone
		return late != m.holders.late()
	}
	sh := m.shape()
	if !force && sh == m.lastShape && time.Duration(now-m.valuesAt) < m.valueInterval(now, start) {
		return false // only values moved, and they were drawn moments ago
	}
	m.lastGen, m.lastFrom, m.lastTo, m.lastShape, m.valuesAt = gen, from, to, sh, now
	m.refreshPanes(now)
	m.refreshChart(now, from, to)
	m.layout()
	return true
}

// valueAt returns a series' value at the cursor (replay, paused) or its
// latest value (live).
func (m *Model) valueAt(k store.Key, now int64) *uint64 {
	var v uint64
	var ok bool
	if m.opt.Replay || m.tl.paused {
		v, ok = m.st.ValueAt(k, m.tl.cursor(now))
	} else {
		v, _, ok = m.st.Latest(k)
	}
	if !ok {
		return nil
	}
	return &v
}

// refreshPanes recomputes everything but the chart.
func (m *Model) refreshPanes(now int64) {
	st := m.st
	start, last := st.Start(), st.End()
	cursor := m.tl.cursor(now)
	devs := st.Devices()
	if m.dev >= len(devs) {
		m.dev = 0
	}
	lines := make([]devLine, len(devs))
	for i, d := range devs {
		lines[i] = devLine{Dev: d, Used: m.valueAt(store.Key{Dev: i, Metric: store.NVMLUsed}, now)}
	}
	m.header.SetData(lines, m.dev)

	m.procs.SetRows(collectProcs(st, m.dev, cursor, m.opt.Replay))
	sel, selOK := m.procs.Selected()

	// summary table
	end := last + 1
	if m.opt.Replay || m.tl.paused {
		end = cursor + 1
	}
	dr, nRows := m.rows.get(st, m.opt.Replay, cursor, devs, m.dev)
	sd := summaryData{Dev: dr, DevIndex: m.dev, Start: start}
	m.nRows = nRows
	if m.dev < len(devs) {
		sd.DevName = devs[m.dev].Name
	}
	if v, ok := m.nvmlPeak.get(st, store.Key{Dev: m.dev, Metric: store.NVMLUsed}, start, end); ok {
		sd.NVMLPeak = &v
	}
	for _, r := range m.procs.rows {
		if !r.Agent {
			continue
		}
		pc := m.torchPeaks[r.PID]
		if pc == nil {
			pc = &peakCache{}
			m.torchPeaks[r.PID] = pc
		}
		if v, ok := pc.get(st, store.Key{Dev: m.dev, PID: r.PID, Metric: store.Peak}, start, end); ok && (sd.TorchPk == nil || v > *sd.TorchPk) {
			vv := v
			sd.TorchPk, sd.TorchPID = &vv, r.PID
		}
	}
	var total uint64
	if m.dev < len(devs) {
		total = devs[m.dev].Total
	}
	sd.OOM = latestOOM(sd.Dev, start, total)
	m.table.SetData(sd)

	// holders
	var rep *wire.Holders
	pid := 0
	if selOK {
		rep, pid = sel.Holders, sel.PID
	}
	m.holders.SetData(pid, rep, m.holdersNote(sel, selOK), now)

	m.status.SetLogs(st.Logs())
}

// refreshChart fetches the chart's columns for [from, to): NVML used of the
// device and, for the selected process when it has an agent, torch's
// reserved, peak and allocated. A series without a source is left out (the
// legend says why), never drawn as zeros.
func (m *Model) refreshChart(now, from, to int64) {
	st := m.st
	cols := m.chart.Columns()
	sel, selOK := m.procs.Selected()
	cd := chartData{From: from, To: to, Window: time.Duration(to - from)}
	series := func(name string, style lipgloss.Style, k store.Key) {
		s := chartSeries{Name: name, Style: style, Cols: st.Columns(k, from, to, cols), Now: m.valueAt(k, now)}
		if v, ok := st.ValueAt(k, from); ok {
			s.Hold = &v
		}
		cd.Series = append(cd.Series, s)
	}
	var notes []string
	nvmlKey := store.Key{Dev: m.dev, Metric: store.NVMLUsed}
	if st.Count(nvmlKey) > 0 {
		series("NVML used (driver)", m.styles.NVMLUsed, nvmlKey)
	} else {
		notes = append(notes, "NVML: no samples for this GPU")
	}
	agentsHere := 0
	for _, r := range m.procs.rows {
		if r.Agent {
			agentsHere++
		}
	}
	switch {
	case selOK && sel.Agent:
		k := store.Key{Dev: m.dev, PID: sel.PID}
		k.Metric = store.Reserved
		series("reserved (torch)", m.styles.Reserved, k)
		k.Metric = store.Peak
		series("peak (torch)", m.styles.Peak, k)
		k.Metric = store.Allocated
		series("allocated (torch)", m.styles.Allocated, k)
		note := fmt.Sprintf("pid %d", sel.PID)
		if sel.Ended {
			note += " " + sel.Status
		}
		notes = append(notes, note)
	case agentsHere > 0 && selOK:
		notes = append(notes, fmt.Sprintf("allocator: pid %d has no agent (select an attached process)", sel.PID))
	default:
		notes = append(notes, "allocator: no agent attached")
	}
	cd.Note = strings.Join(notes, "  ")
	cd.Markers = st.MarkersIn(m.dev, from, to) // in time order
	m.chart.SetData(cd)
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
	header, chart, procs, table, holders, help int
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
	m.prompt.SetSize(m.w, 1)
	m.status.SetSize(m.w, 1)
	return l
}

// View draws the screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.content())
	v.AltScreen = true
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

// rowsCache keeps the summary rows (deltas and verdicts computed) and the
// selected GPU's share of them until the store's rows change, the GPU
// changes or, in replay, the cursor passes a row: a screen redrawn for new
// samples costs nothing per row.
type rowsCache struct {
	ver   uint64
	n     int // rows up to the cursor (replay)
	devs  int
	dev   int
	rows  []snapshot.Row
	dr    snapshot.DevRows
	valid bool
}

// get returns the rows of device dev and how many rows there are in all.
func (c *rowsCache) get(st *store.Store, replay bool, cursor int64, devs []store.Device, dev int) (snapshot.DevRows, int) {
	ver := st.Shape().Rows
	n := -1
	if replay {
		n = st.CountSnapshots(cursor)
	}
	if !c.valid || c.ver != ver || c.n != n || c.devs != len(devs) {
		snaps := st.Snapshots()
		if n >= 0 {
			snaps = snaps[:min(n, len(snaps))]
		}
		*c = rowsCache{ver: ver, n: n, devs: len(devs), dev: -1, rows: snapshot.Rows(snaps, devs), valid: true}
	}
	if c.dev != dev {
		c.dev, c.dr = dev, snapshot.ForDevice(c.rows, dev)
	}
	return c.dr, len(c.rows)
}
