package ui

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// summaryRows is what the summary pane shows.
type summaryRows struct {
	Dev      summary.DeviceRows // the selected GPU's rows visible at the cursor, time order
	DevIndex int                // the selected GPU (the footer is about it)
	DevName  string
	Start    int64 // run start, for the TIME column
	NVMLPeak *uint64
	TorchPk  *uint64
	TorchPID string   // the process, as the process pane shows its pid
	OOM      *oomNote // the selected device's latest OOM, explained under the table
	Total    uint64   // the selected device's memory (0: unknown), for a selected OOM row
	Bounds   store.Bounds
	// the forecast of each agent process on the GPU (forecast.go)
	Forecasts []forecast.Process
}

// summaryModel is the summary: the reference tracker's table made live, with
// NVML next to torch's allocator figures, deltas, the run's peaks and the
// verdict of every end row.
type summaryModel struct {
	styles *Styles
	w, h   int
	d      summaryRows
	tc     *tableCache
	// the selected row (index into d.Dev.Rows), or -1: none, the newest
	// rows are shown
	sel    int
	pick   *rowPick   // a row to select once it is in the data (rowdetail.go)
	drawn  *drawnRows // the rows the last View showed, for paging and the mouse
	marked bool       // the pane has the focus and says so (focus.go)
	data   uint64     // which SetData d came from (dataSeq)
	tail   *tailMemo
}

// dataSeq numbers every SetData of every summary, so that a tailMemo made
// for one model's data is never taken for another copy's.
var dataSeq atomic.Uint64

// tailMemo keeps the lines under the table for the data, size and selection
// they were made for: the layout asks for the pane's height twice a frame
// and View draws them once more, and wrapping them was the most of a
// value-only frame's own work.
type tailMemo struct {
	key   tailKey
	lines []string
	ok    bool
}

type tailKey struct {
	data      uint64
	w, h, sel int
	marked    bool
}

func newSummary(st *Styles) summaryModel {
	return summaryModel{styles: st, tc: &tableCache{}, sel: -1, drawn: &drawnRows{}, tail: &tailMemo{}}
}

func (m *summaryModel) SetSize(w, h int) { m.w, m.h = w, h }

// SetData gives the table new rows; a selection past them is dropped.
func (m *summaryModel) SetData(d summaryRows) {
	m.d, m.data = d, dataSeq.Add(1)
	if m.sel >= len(d.Dev.Rows) {
		m.sel = len(d.Dev.Rows) - 1 // a deleted last row: the one before it
	}
	m.takePick()
}

// Move moves the row selection by delta (from none: the newest row).
func (m *summaryModel) Move(delta int) {
	n := len(m.d.Dev.Rows)
	if n == 0 {
		m.sel = -1
		return
	}
	if m.sel < 0 {
		m.sel = n
	}
	m.sel = min(max(m.sel+delta, 0), n-1)
}

// Unselect drops the selection: the table follows the newest rows again.
func (m *summaryModel) Unselect() { m.sel = -1 }

// verdictRows are the rows whose verdicts are shown under the table: the
// selected row when it is an end row, then each process's latest end row.
func (m *summaryModel) verdictRows() []int {
	var out []int
	if m.sel >= 0 && m.d.Dev.Rows[m.sel].Verdict != nil {
		out = append(out, m.sel)
	}
	for _, i := range m.d.Dev.Latest {
		if i != m.sel {
			out = append(out, i)
		}
	}
	return out
}

// Lines is how many lines the pane wants.
func (m *summaryModel) Lines() int {
	n := 1 + max(len(m.d.Dev.Rows), 1)
	return n + len(m.tailLines())
}

// missing reports which sources are absent in the rows shown.
func (m *summaryModel) missing() (allocAll, allocAny, nvmlAll, nvmlAny bool) {
	d := m.d.Dev
	return d.NoAllocAll, d.NoAllocSome, d.NoNVMLAll, d.NoNVMLSome
}

func (m *summaryModel) footnote() string {
	_, allocAny, _, nvmlAny := m.missing()
	notes := boundNotes(m.d.Bounds) // rows the table lacks come first
	if allocAny {
		notes = append(notes, dash+" allocated/reserved/peak: no agent attached at that moment (torch's allocator is only visible from inside the process)")
	}
	if m.d.Dev.NoTorchSome {
		notes = append(notes, dash+" allocated/reserved/peak: the process uses no torch on this GPU (its framework's figures, in its own names, are in the row's details)")
	}
	if nvmlAny {
		notes = append(notes, dash+" NVML used/peak: not sampled for this GPU then (an agent-only GPU, or --source agent)")
	}
	return strings.Join(notes, "; ")
}

// boundNotes say what the bounds on rows left out, every GPU's.
func boundNotes(b store.Bounds) []string {
	var notes []string
	if b.RowsDropped > 0 {
		notes = append(notes, fmt.Sprintf("%d older rows dropped (at most %d kept; not in the CSV, a recording has them)", b.RowsDropped, b.MaxRows))
	}
	if b.LabelsCut > 0 {
		notes = append(notes, fmt.Sprintf("%d labels cut to %d bytes (%s)", b.LabelsCut, wire.MaxLabelBytes, wire.LabelCut))
	}
	if b.MarkDevs > 0 {
		notes = append(notes, fmt.Sprintf("%d devices of marks past %d got no row", b.MarkDevs, wire.MaxMarkRows))
	}
	return notes
}

func (m *summaryModel) View() string {
	st := m.styles
	if m.h <= 0 {
		return ""
	}
	tail := m.tailLines()
	all := m.d.Dev.Rows
	if len(all) == 0 {
		*m.drawn = drawnRows{}
		head := st.TableHeader.Render("SUMMARY") + "  " + st.Dim.Render("none yet: press s to take one (or call gputop.snapshot(label) in the training code)")
		return fit(strings.Join(append([]string{head}, st.cutLines(tail, m.h-1, m.w)...), "\n"), m.w, m.h)
	}
	room := m.h - 1 - len(tail)
	if room < 1 {
		// too short for the whole footer: the rows keep half the pane
		// (all of it they need when fewer), the footer the rest, its last
		// line saying how to see it whole when it is cut (whole.go)
		n := m.h - 1 - min(len(all), max((m.h-1)/2, 1))
		var sel int
		tail, sel = m.shortTail(m.oomLines())
		if len(tail) > n {
			tail, sel = m.shortTail(m.oomShortLines())
		}
		// a selected row's verdict is what its user looks at: the rows
		// give it their lines, down to the selected row alone
		if need := wholeThrough(tail, sel); need > n {
			n = min(need, m.h-2)
		}
		// then the peaks, the forecasts and what the rows lack, in the
		// lines left, the last saying how to see what has no room
		if len(tail) < n {
			tail = append(tail, st.cutLines(m.tailNotes(), n-len(tail), m.w)...)
		}
		tail = st.cutLines(tail, n, m.w)
		room = max(m.h-1-len(tail), 1)
	}
	// the newest rows matter most: show the last ones that fit, or the
	// ones around the selected row
	first := max(len(all)-room, 0)
	if m.sel >= 0 && (m.sel < first || m.sel >= first+room) {
		first = min(max(m.sel-room/2, 0), max(len(all)-room, 0))
	}
	rows := all[first:min(first+room, len(all))]
	*m.drawn = drawnRows{first: first, n: len(rows)}
	earlier, later := first, len(all)-first-len(rows)
	cols, shown := m.columns(rows, earlier, later)
	ctx := &summary.Context{Start: m.d.Start}
	data := make([][]string, len(rows))
	for i, r := range rows {
		data[i] = make([]string, len(shown))
		for j, c := range shown {
			data[i][j] = c.Value.Cell(r, ctx)
		}
	}
	sel := -1
	if m.sel >= 0 {
		sel = m.sel - first
	}
	tbl := m.tc.render(st, tableSpec{Cols: cols, Rows: data, Width: m.w, Selected: sel,
		CellStyle: func(row, col int, cell string) (lipgloss.Style, bool) {
			switch {
			case cell == dash:
				return st.Missing, true
			case shown[col].Name == "label" && row < len(rows) && rows[row].OOM != nil:
				return st.Error, true
			case cell == summary.Released.Mark() || cell == summary.Leaked.Mark() ||
				cell == summary.Unknown.Mark() || cell == summary.Pending.Mark():
				return m.verdictStyle(cell), true
			}
			return lipgloss.Style{}, false
		}})
	return fit(strings.Join(append([]string{tbl}, tail...), "\n"), m.w, m.h)
}

// shortTail is the footer of a pane too short for it, most wanted first:
// the verdicts and the OOM's explanation (oom: whole or its short form),
// the newer of the two first, after the selected row's details and its
// ledger's bar and figures (an OOM row's note after the explanation: it
// says which row it is), then torch's cache at the row and the rest of
// its ledger. sel is how many of its lines end with the selected row's
// verdict (0: the selected row has none).
func (m *summaryModel) shortTail(oom []string) (tail []string, sel int) {
	verdicts := m.verdictLines()
	if r, ok := m.Selected(); ok && r.Verdict != nil {
		sel = len(m.verdictOf(m.sel)) // verdictLines puts it first
	}
	tail = append(append([]string(nil), verdicts...), oom...)
	if m.d.OOM != nil && m.d.OOM.T > m.latestEnd() {
		tail = append(append([]string(nil), oom...), verdicts...)
		if sel > 0 {
			sel += len(oom)
		}
	}
	head, rest := m.ledgerParts()
	detail := m.rowDetail(false) // an end row's holders: its verdict says them
	if r, ok := m.Selected(); ok && r.OOM != nil {
		tail = append(append(tail, detail...), head...)
	} else {
		tail = append(append(detail, head...), tail...)
		if sel > 0 {
			sel += len(detail) + len(head)
		}
	}
	tail = append(tail, m.layoutLines()...)
	return append(tail, rest...), sel
}

// wholeThrough is how many lines a footer cut by cutLines needs to keep
// its first n lines whole: n, and the line saying more follow when some
// do.
func wholeThrough(tail []string, n int) int {
	if n > 0 && len(tail) > n {
		return n + 1
	}
	return n
}

// SelectedLines is the height at which a pane too short for its footer
// still shows the selected row's verdict whole, with the rows around it
// (three at most): 0 when the selected row has no verdict. The layout
// gives the pane these lines when it can (draw.go).
func (m *summaryModel) SelectedLines() int {
	if r, ok := m.Selected(); !ok || r.Verdict == nil {
		return 0
	}
	tail, sel := m.shortTail(m.oomShortLines())
	if sel == 0 {
		return 0
	}
	return min(1+min(len(m.d.Dev.Rows), 3)+wholeThrough(tail, sel), m.Lines())
}

// tailNotes are the run's peaks, the forecasts and what the rows lack.
func (m *summaryModel) tailNotes() []string {
	tail := append([]string{m.peakLine()}, m.forecastLines()...)
	if f := m.footnote(); f != "" {
		tail = append(tail, m.styles.Dim.Render(f))
	}
	return tail
}

// tailLines are the lines under the table, each wrapped to the pane: the
// run's peaks, the forecasts, what the rows lack, the OOM explained, the
// verdicts, the selected row's details, torch's cache at it and its ledger.
func (m *summaryModel) tailLines() []string {
	k := tailKey{data: m.data, w: m.w, h: m.h, sel: m.sel, marked: m.marked}
	if m.tail.ok && m.tail.key == k {
		return slices.Clip(m.tail.lines) // a caller's append copies
	}
	lines := m.makeTailLines()
	*m.tail = tailMemo{key: k, lines: lines, ok: true}
	return slices.Clip(lines)
}

func (m *summaryModel) makeTailLines() []string {
	tail := append(m.tailNotes(), m.oomLines()...)
	tail = append(tail, m.verdictLines()...)
	tail = append(tail, m.detailLines()...)
	tail = append(tail, m.layoutLines()...)
	return append(tail, m.ledgerLines()...)
}

// columns are the table's columns for rows (summary.TUIColumns, as this
// width and these rows have them), with how many rows are out of view
// before and after them in the label's title.
func (m *summaryModel) columns(rows []summary.Row, earlier, later int) ([]column, []summary.Column) {
	allocAll, _, nvmlAll, _ := m.missing()
	endRow := slices.ContainsFunc(rows, func(r summary.Row) bool { return r.Verdict != nil })
	var cols []column
	var shown []summary.Column
	for _, c := range summary.TUIColumns() {
		tc := c.TUI
		switch {
		case tc.Only == summary.SeveralProcesses && !m.d.Dev.MultiProcess,
			tc.Only == summary.EndRowShown && !endRow:
			continue
		}
		title := tc.Title
		if tc.Wide != "" && m.w >= summary.WideTitles {
			title = tc.Wide
		}
		switch {
		case tc.SaysAbsent && c.Origin == summary.OriginTorch && m.d.Dev.NoTorchAll:
			title += " (no torch)"
		case tc.SaysAbsent && c.Origin == summary.OriginTorch && allocAll:
			title += " (no agent)"
		case tc.SaysAbsent && c.Origin == summary.OriginDriver && nvmlAll:
			title += " (no NVML)"
		}
		short := ""
		if tc.Flex {
			// the rows out of view, and, where the column is too narrow
			// for that, with arrows: "LABEL ↑3 ↓2" rather than "LABEL (+3 ea…"
			short = title
			switch {
			case earlier > 0 && later > 0:
				title = fmt.Sprintf("%s (+%d earlier, +%d later)", title, earlier, later)
				short = fmt.Sprintf("%s ↑%d ↓%d", short, earlier, later)
			case earlier > 0:
				title = fmt.Sprintf("%s (+%d earlier)", title, earlier)
				short = fmt.Sprintf("%s ↑%d", short, earlier)
			case later > 0:
				title = fmt.Sprintf("%s (+%d later)", title, later)
				short = fmt.Sprintf("%s ↓%d", short, later)
			}
			if m.marked {
				title, short = focusMark+title, focusMark+short
			}
		}
		cols = append(cols, column{Title: title, Short: short, Right: tc.Right, Priority: tc.Priority, Flex: tc.Flex})
		shown = append(shown, c)
	}
	return cols, shown
}

// latestEnd is the time of the newest end row shown (0: none).
func (m *summaryModel) latestEnd() int64 {
	var t int64
	for _, i := range m.d.Dev.Latest {
		t = max(t, m.d.Dev.Rows[i].T)
	}
	return t
}

// verdictStyle colours a verdict's sign.
func (m *summaryModel) verdictStyle(mark string) lipgloss.Style {
	switch mark {
	case summary.Released.Mark():
		return m.styles.Good
	case summary.Leaked.Mark():
		return m.styles.Error
	}
	return m.styles.Warn
}

// peakLine is the footer: the whole-run peaks of the selected device.
func (m *summaryModel) peakLine() string {
	st := m.styles
	nv := dash + " (no NVML)"
	if m.d.NVMLPeak != nil {
		nv = summary.MiB(*m.d.NVMLPeak) + " MiB"
	}
	tp := dash + " (no agent)"
	if m.d.Dev.NoTorchAll {
		tp = dash + " (no torch)"
	}
	if m.d.TorchPk != nil {
		tp = fmt.Sprintf("%s MiB (pid %s)", summary.MiB(*m.d.TorchPk), m.d.TorchPID)
	}
	rest := fmt.Sprintf(" NVML used %s, torch allocated %s", nv, tp)
	head := fmt.Sprintf("run peak on GPU %d:", m.d.DevIndex)
	if lipgloss.Width(head+rest) > m.w {
		head = "run peak:"
	}
	return st.Bold.Render(head) + rest
}

// wrap breaks s into lines of the pane's width: a verdict or an explanation
// is wrapped, never cut.
func (m *summaryModel) wrap(s string) []string { return wrapTo(s, m.w) }

// wrapTo breaks s into lines of at most w cells (w <= 0: one line).
func wrapTo(s string, w int) []string {
	if w <= 0 || lipgloss.Width(s) <= w {
		return []string{s}
	}
	lines := strings.Split(lipgloss.NewStyle().Width(w).Render(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines
}

// oomLines explain the selected device's latest OOM: what was asked for,
// where the memory was, and the likely cause.
func (m *summaryModel) oomLines() []string {
	n := m.oomNote()
	if n == nil {
		return nil
	}
	lines := m.wrap(m.styles.Error.Render("✗ OOM") + " " + n.Head)
	// the explanation under it, indented on every line it wraps to
	for _, l := range wrapTo(n.Body, max(m.w-2, 1)) {
		lines = append(lines, "  "+l)
	}
	return lines
}

// oomShortLines are oomLines for a pane too short for them: the note's
// short form, which keeps what was measured and the suggestion, where it
// has one (a selected row's without its time: the row is marked).
func (m *summaryModel) oomShortLines() []string {
	n := m.oomNote()
	if n == nil || n.Short == "" {
		return m.oomLines()
	}
	when := n.When
	if n.Selected {
		when = "selected row"
	}
	return m.wrap(m.styles.Error.Render("✗ OOM") + " " + when + ": " + n.Short)
}

// verdictLines are the verdicts under the table (see verdictRows), each
// wrapped, never cut: its sign, whose row it is when several processes
// share the GPU, the text, what it is based on, and the baseline
// comparison as a second, dim figure.
func (m *summaryModel) verdictLines() []string {
	var out []string
	for _, i := range m.verdictRows() {
		out = append(out, m.verdictOf(i)...)
	}
	return out
}

// verdictOf is row i's verdict, wrapped.
func (m *summaryModel) verdictOf(i int) []string {
	st := m.styles
	r := m.d.Dev.Rows[i]
	v := r.Verdict
	text := v.Text
	if m.d.Dev.MultiProcess && r.PID != 0 {
		text = fmt.Sprintf("pid %d, %s", r.PID, text)
	}
	if i == m.sel {
		text = "selected row: " + text
	}
	line := m.verdictStyle(v.Status.Mark()).Render(v.Status.Mark()) + " " + text + " " + st.Dim.Render("["+v.Basis+"]")
	if v.Baseline != "" && m.w >= 120 {
		// a second figure: left out where it would cost another line
		line += " " + st.Dim.Render("("+v.Baseline+")")
	}
	return m.wrap(line)
}
