package ui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/wire"
)

// summaryData is what the snapshot table shows.
type summaryData struct {
	Rows     []snapshot.Row // rows visible at the cursor, all devices, time order
	Dev      int            // selected device (the verdict and footer are about it)
	DevName  string
	Start    int64 // run start, for the TIME column
	NVMLPeak *uint64
	TorchPk  *uint64
	TorchPID int
	// holders reports by pid, for naming what keeps leaked memory alive
	Holders map[int]*wire.Holders
	OOM     *oomNote // the selected device's latest OOM, explained under the table
}

// tableModel is the summary: the reference tracker's table made live, with
// NVML next to torch's allocator figures, deltas, the run's peaks and the
// leak verdict.
type tableModel struct {
	styles *Styles
	w, h   int
	d      summaryData
	tc     *tableCache
}

func newTable(st *Styles) tableModel { return tableModel{styles: st, tc: &tableCache{}} }

func (m *tableModel) SetSize(w, h int) { m.w, m.h = w, h }

func (m *tableModel) SetData(d summaryData) { m.d = d }

func optMiB(b *uint64) string {
	if b == nil {
		return dash
	}
	return snapshot.MiB(*b)
}

func optDeltaMiB(d *int64) string {
	if d == nil {
		return dash
	}
	return snapshot.SignedMiB(*d)
}

// devRows are the rows of the selected device.
func (m *tableModel) devRows() []snapshot.Row {
	var out []snapshot.Row
	for _, r := range m.d.Rows {
		if r.Dev == m.d.Dev {
			out = append(out, r)
		}
	}
	return out
}

// Verdict returns the leak verdict for the selected device, when its last
// row closes a run.
func (m *tableModel) Verdict() (snapshot.Verdict, bool) {
	return snapshot.LeakVerdict(m.devRows())
}

// Lines is how many lines the pane wants.
func (m *tableModel) Lines() int {
	n := 1 + max(len(m.d.Rows), 1) + 1
	if m.footnote() != "" {
		n++
	}
	if v, ok := m.Verdict(); ok {
		n += len(m.verdictLines(v))
	}
	return n + len(m.oomLines())
}

// missing reports which sources are absent in the rows shown.
func (m *tableModel) missing() (allocAll, allocAny, nvmlAll, nvmlAny bool) {
	allocAll, nvmlAll = len(m.d.Rows) > 0, len(m.d.Rows) > 0
	for _, r := range m.d.Rows {
		if r.Allocated == nil {
			allocAny = true
		} else {
			allocAll = false
		}
		if r.NVMLUsed == nil {
			nvmlAny = true
		} else {
			nvmlAll = false
		}
	}
	return
}

func (m *tableModel) footnote() string {
	_, allocAny, _, nvmlAny := m.missing()
	var notes []string
	if allocAny {
		notes = append(notes, dash+" allocated/reserved/peak: no agent attached at that moment (torch's allocator is only visible from inside the process)")
	}
	if nvmlAny {
		notes = append(notes, dash+" NVML: no driver figures for that GPU")
	}
	return strings.Join(notes, "; ")
}

func (m *tableModel) View() string {
	st := m.styles
	if m.h <= 0 {
		return ""
	}
	verdict, hasVerdict := m.Verdict()
	var tail []string
	tail = append(tail, m.peakLine())
	if f := m.footnote(); f != "" {
		tail = append(tail, st.Dim.Render(f))
	}
	tail = append(tail, m.oomLines()...)
	if hasVerdict {
		tail = append(tail, m.verdictLines(verdict)...)
	}
	if len(m.d.Rows) == 0 {
		head := st.TableHeader.Render("SNAPSHOTS") + "  " + st.Dim.Render("none yet: press s to take one (or call gputop.snapshot(label) in the training code)")
		return fit(strings.Join(append([]string{head}, tail...), "\n"), m.w, m.h)
	}
	// the newest rows matter most: show the last ones that fit
	room := m.h - 1 - len(tail)
	if room < 1 {
		// too short for the whole footer: the rows keep at least half the
		// pane; the verdict and the OOM's explanation go before the peaks
		tail = nil
		if hasVerdict {
			tail = append(tail, m.verdictLines(verdict)[0])
		}
		tail = append(tail, m.oomLines()...)
		tail = tail[:min(len(tail), (m.h-1)/2)]
		room = max(m.h-1-len(tail), 1)
	}
	rows := m.d.Rows
	hidden := 0
	if len(rows) > room {
		hidden = len(rows) - room
		rows = rows[hidden:]
	}
	allocAll, _, nvmlAll, _ := m.missing()
	noAgent, noNVML := "", ""
	if allocAll {
		noAgent = " (no agent)"
	}
	if nvmlAll {
		noNVML = " (no NVML)"
	}
	multiDev := false
	for _, r := range m.d.Rows {
		if r.Dev != m.d.Rows[0].Dev {
			multiDev = true
		}
	}
	label := "LABEL"
	if hidden > 0 {
		label = fmt.Sprintf("LABEL (+%d earlier)", hidden)
	}
	// wide terminals get the long names (the reference tracker's "cached",
	// what the NVML peak covers, the deltas' unit)
	reserved, nvPeak, dAlloc, dNVML := "RESERVED MiB", "NVML PEAK MiB", "Δ ALLOC", "Δ NVML"
	if m.w >= 140 {
		reserved, nvPeak, dAlloc, dNVML = "RESERVED (CACHED) MiB", "NVML PEAK SINCE PREV MiB", "Δ ALLOC MiB", "Δ NVML MiB"
	}
	cols := []column{
		{Title: label, Priority: 10, Flex: true},
		{Title: "TIME", Right: true, Priority: 4},
		{Title: "GPU", Right: true, Priority: 3},
		{Title: "ALLOCATED MiB" + noAgent, Right: true, Priority: 9},
		{Title: reserved + noAgent, Right: true, Priority: 8},
		{Title: "PEAK MiB" + noAgent, Right: true, Priority: 7},
		{Title: "NVML USED MiB" + noNVML, Right: true, Priority: 9},
		{Title: nvPeak, Right: true, Priority: 5},
		{Title: dAlloc, Right: true, Priority: 6},
		{Title: dNVML, Right: true, Priority: 2},
	}
	if !multiDev {
		cols[2].Priority = -1
	}
	var data [][]string
	for _, r := range rows {
		data = append(data, []string{
			r.Label, elapsed(time.Duration(r.T - m.d.Start)), fmt.Sprint(r.Dev),
			optMiB(r.Allocated), optMiB(r.Reserved), optMiB(r.Peak), optMiB(r.NVMLUsed), optMiB(r.NVMLPeak),
			optDeltaMiB(r.DAllocated), optDeltaMiB(r.DNVML),
		})
	}
	if !multiDev {
		cols = append(cols[:2], cols[3:]...)
		for i := range data {
			data[i] = append(data[i][:2], data[i][3:]...)
		}
	}
	tbl := m.tc.render(st, tableSpec{Cols: cols, Rows: data, Width: m.w, Selected: -1,
		CellStyle: func(row, col int, cell string) (lipgloss.Style, bool) {
			switch {
			case cell == dash:
				return st.Missing, true
			case col == 0 && strings.HasPrefix(cell, "OOM"):
				return st.Error, true
			}
			return lipgloss.Style{}, false
		}})
	return fit(strings.Join(append([]string{tbl}, tail...), "\n"), m.w, m.h)
}

// peakLine is the footer: the whole-run peaks of the selected device.
func (m *tableModel) peakLine() string {
	st := m.styles
	nv := dash + " (no NVML)"
	if m.d.NVMLPeak != nil {
		nv = snapshot.MiB(*m.d.NVMLPeak) + " MiB"
	}
	tp := dash + " (no agent)"
	if m.d.TorchPk != nil {
		tp = fmt.Sprintf("%s MiB (pid %d)", snapshot.MiB(*m.d.TorchPk), m.d.TorchPID)
	}
	rest := fmt.Sprintf(" NVML used %s, torch allocated %s", nv, tp)
	head := fmt.Sprintf("run peak on GPU %d:", m.d.Dev)
	if lipgloss.Width(head+rest) > m.w {
		head = "run peak:"
	}
	return st.Bold.Render(head) + rest
}

// wrap breaks s into lines of the pane's width: a verdict or an explanation
// is wrapped, never cut.
func (m *tableModel) wrap(s string) []string { return wrapTo(s, m.w) }

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
func (m *tableModel) oomLines() []string {
	n := m.d.OOM
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

// verdictLines say whether memory went back to the baseline and, when the
// process has a holders report, which holders account for what did not (on
// a second line when one is too narrow).
func (m *tableModel) verdictLines(v snapshot.Verdict) []string {
	st := m.styles
	wrap := m.wrap
	if v.Released {
		return wrap(st.Good.Render("✓ leak check:") + " " + v.Text)
	}
	line := st.Error.Render("✗ leak check:") + " " + v.Text
	h := m.d.Holders[v.Now.PID]
	if h == nil {
		return wrap(line)
	}
	top := topHolders(h, v.Leaked)
	if len(top) == 0 {
		return wrap(line)
	}
	held := "held by " + strings.Join(top, ", ")
	if one := line + "; " + held; lipgloss.Width(one) <= m.w {
		return []string{one}
	}
	return append(wrap(line), wrap("  "+held)...)
}

// topHolders names the biggest holder groups until they account for want
// bytes (at most four).
func topHolders(h *wire.Holders, want int64) []string {
	groups := append([]wire.HolderGroup(nil), h.Groups...)
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Bytes > groups[j].Bytes })
	var out []string
	var sum int64
	for _, g := range groups {
		if len(out) == 4 || (sum >= want && len(out) > 0) || g.Bytes == 0 {
			break
		}
		out = append(out, fmt.Sprintf("%s (%s) %s", g.Name, g.Kind, humanBytes(g.Bytes)))
		sum += int64(g.Bytes)
	}
	return out
}
