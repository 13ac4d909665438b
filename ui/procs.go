package ui

import (
	"fmt"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// procsModel is the process pane; up/down select a process, and the chart's
// allocator series and the holders pane follow the selection.
type procsModel struct {
	styles *Styles
	w, h   int
	rows   []present.Process
	hidden int  // ended processes not listed (present.Screen.EndedHidden)
	sel    int  // selected pid
	chosen bool // the user picked sel; else it follows the default
	tc     *tableCache
	order  present.ProcessOrder // the sort key cycles it (sort.go)
	drawn  *drawnRows           // the rows the last View showed, for the mouse
	marked bool                 // the pane has the focus and says so (focus.go)
	// the forecasts of the GPU's agent processes; the selected one's is
	// shown under the rows (forecast.go)
	forecasts []forecast.Process
	cache     *present.Cache // torch's cache of the selected process, under the rows
}

func newProcs(st *Styles) procsModel {
	return procsModel{styles: st, tc: &tableCache{}, drawn: &drawnRows{}}
}

func (m *procsModel) SetSize(w, h int) { m.w, m.h = w, h }

// SetRows replaces the rows and the selection (an index into rows, -1 for
// none) the presenter chose: the pid the user picked while it is there (picked),
// else its default; then sorts the rows in the pane's order. hidden counts
// the ended processes the presenter left out.
func (m *procsModel) SetRows(rows []present.Process, sel int, picked bool, hidden int) {
	m.chosen, m.sel = picked, 0
	if sel >= 0 {
		m.sel = rows[sel].PID
	}
	present.SortProcesses(rows, m.order)
	m.rows, m.hidden = rows, hidden
}

// SetCache gives the pane torch's cache of the selected process (nil:
// none to show).
func (m *procsModel) SetCache(c *present.Cache) { m.cache = c }

// Lines is how many lines the pane wants (header + rows, a line of notes
// when it has any, and the selected process's cache).
func (m *procsModel) Lines() int {
	n := 1 + max(len(m.rows), 1)
	if len(m.notes()) > 0 {
		n++
	}
	return n + len(m.forecastLines()) + len(m.cacheLines()) + len(m.frameworkLines())
}

// frameworkLines say what the selected process's frameworks beside torch
// (JAX, CuPy) hold on the GPU, in their own names: JAX's in-use beside
// the pool XLA preallocated, and the XLA settings in force.
func (m *procsModel) frameworkLines() []string {
	r, ok := m.Selected()
	if !ok || len(r.Frameworks) == 0 {
		return nil
	}
	var out []string
	for _, f := range r.Frameworks {
		out = append(out, wrapTo("  "+printable.Clean("pid "+r.Label+", "+summary.FrameworkText(f)), m.w)...)
	}
	return out
}

// cacheLines say what torch's cache of the selected process held at the
// cursor (live: its newest reading), wrapped to the pane: the figures the
// agent measured, its pools and settings, how old the reading is, and why
// the newest reading was skipped when it was.
func (m *procsModel) cacheLines() []string {
	c := m.cache
	if c == nil {
		return nil
	}
	of := "the cursor"
	if c.Live {
		of = "now"
	}
	text := fmt.Sprintf("torch's cache, pid %s on GPU %d: ", c.Label, c.Dev)
	switch {
	case c.OK && c.Skipped != "":
		text += summary.LayoutText(c.Layout, c.At, of) + "; the newest reading was skipped: " + c.Skipped
	case c.OK:
		text += summary.LayoutText(c.Layout, c.At, of)
	default:
		text += "no reading: " + c.Skipped
	}
	return wrapTo("  "+printable.Clean(text), m.w)
}

// notes say what the rows cannot: ended processes left out, and what a
// namespace-local pid is.
func (m *procsModel) notes() []string {
	var out []string
	if m.hidden > 0 {
		out = append(out, fmt.Sprintf("… and %d ended", m.hidden))
	}
	for _, r := range m.rows {
		if r.NSLocal {
			out = append(out, "nsN:PID: its own pid inside a pid namespace gputop cannot see (N: its connection)")
			break
		}
	}
	return out
}

func (m *procsModel) index() int {
	for i, r := range m.rows {
		if r.PID == m.sel {
			return i
		}
	}
	return -1
}

// Selected returns the selected row, if any.
func (m *procsModel) Selected() (present.Process, bool) {
	if i := m.index(); i >= 0 {
		return m.rows[i], true
	}
	return present.Process{}, false
}

// usedCell is a process's NVML used; a figure from before it left says so.
func usedCell(r present.Process) string {
	if r.UsedLast && r.Used != nil {
		return "last " + humanBytes(*r.Used)
	}
	return optHuman(r.Used)
}

// standCell is a framework's figure in a torch column, its name first
// ("jax 12.0 MiB"); the pane's line under the table names the figure.
func standCell(name string, f *wire.Figure) string {
	if f == nil {
		return dash
	}
	return printable.Clean(name) + " " + humanBytes(f.Value)
}

func optSigned(d *int64) string {
	if d == nil {
		return dash
	}
	if *d < 0 {
		return "-" + humanBytes(uint64(-*d))
	}
	return humanBytes(uint64(*d))
}

func (m *procsModel) View() string {
	st := m.styles
	if m.h <= 0 {
		return ""
	}
	notes := m.notes()
	if len(m.rows) == 0 {
		return fit(st.TableHeader.Render("PROCESSES")+"  "+st.Dim.Render(strings.Join(append([]string{"no process on this GPU"}, notes...), "  ")), m.w, m.h)
	}
	// the selected process's forecast and cache in the lines the rows and
	// notes leave
	below := append(append(m.frameworkLines(), m.forecastLines()...), m.cacheLines()...)
	room := m.h - 1 - len(m.rows)
	if len(notes) > 0 {
		room--
	}
	below = st.cutLines(below, max(room, 0), m.w)
	h := m.h - len(below)
	cols := []column{
		{Title: m.sortTitle("PID", present.ByPID), Right: true, Priority: 9},
		{Title: "PROCESS", Priority: 8, Flex: true},
		{Title: m.sortTitle("NVML USED", present.ByUsed), Right: true, Priority: 7},
		{Title: m.sortTitle("ALLOCATED", present.ByAllocated), Right: true, Priority: 6},
		{Title: "RESERVED", Right: true, Priority: 5},
		{Title: "PROC NON-TORCH", Right: true, Priority: 3}, // this process: NVML used − torch reserved
		{Title: "AGENT", Priority: 4},
		{Title: "OOM", Right: true, Priority: 2},
	}
	// a narrow pane keeps the OOM count over the non-torch figure when a
	// process has had one
	for _, r := range m.rows {
		if r.OOMs > 0 {
			cols[5].Priority, cols[7].Priority = 2, 3
			break
		}
	}
	// keep the selected row in view; when rows are hidden, or there are
	// notes, the last line says how many and what
	first, n := 0, h-1
	foot := (len(notes) > 0 || len(m.rows) > n) && n >= 2
	if foot {
		n--
	}
	more := foot && len(m.rows) > n
	sel := m.index()
	if len(m.rows) > n && n > 0 {
		first = min(max(sel-n+1, 0), len(m.rows)-n)
	}
	var data [][]string
	for _, r := range m.rows[first:min(first+max(n, 0), len(m.rows))] {
		name := r.Name
		if name == "" {
			name = "?"
		}
		if r.Rank != "" {
			name = r.Rank + "  " + name // first: a long command line is cut from the end
		}
		agent := dash
		if r.Agent {
			agent = agentCell(r)
		}
		ooms := ""
		if r.OOMs > 0 {
			ooms = strconv.Itoa(r.OOMs)
		}
		pid := r.Label
		if pid == "" {
			pid = strconv.Itoa(r.PID)
		}
		alloc, res := optHuman(r.Allocated), optHuman(r.Reserved)
		if s := r.Stand; s != nil {
			// a JAX or CuPy process: its framework's figures, named so
			alloc, res = standCell(s.Name, s.InUse), standCell(s.Name, s.Reserved)
		}
		data = append(data, []string{
			pid, name, usedCell(r), alloc, res,
			optSigned(r.NonTorch), agent, ooms,
		})
	}
	selected := -1
	if sel >= first {
		selected = sel - first
	}
	*m.drawn = drawnRows{first: first, n: len(data)}
	out := m.tc.render(st, tableSpec{Cols: cols, Rows: data, Width: m.w, Selected: selected,
		CellStyle: func(row, col int, cell string) (lipgloss.Style, bool) {
			switch {
			case cell == dash:
				return st.Missing, true
			case col == 7 && cell != "":
				return st.Error, true
			case col == 6 && strings.HasPrefix(cell, "ended"):
				return st.Error, true
			case col == 6 && cell == "exited":
				return st.Dim, true
			}
			return lipgloss.Style{}, false
		}})
	if foot {
		if more {
			notes = append([]string{fmt.Sprintf("%d-%d of %d processes (↑/↓)", first+1, first+n, len(m.rows))}, notes...)
		}
		out += "\n" + st.Dim.Render("  "+strings.Join(notes, "  "))
	}
	if len(below) > 0 {
		out += "\n" + strings.Join(below, "\n")
	}
	return fit(out, m.w, m.h)
}
