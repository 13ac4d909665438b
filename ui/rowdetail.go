// The selected row: picking it, and its details under the table
// (what it is, the explanation of an OOM row, who held the memory at an
// end row; its verdict is among the verdict lines).

package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/summary"
)

// rowPick names a row (by its ID) to select once the table's data holds
// it (a marker jump selects the marker's row, which a replay shows only
// from then on).
type rowPick struct {
	id uint64
}

// takePick selects the picked row when the data has it.
func (m *summaryModel) takePick() {
	p := m.pick
	if p == nil {
		return
	}
	for i, r := range m.d.Dev.Rows {
		if r.ID == p.id {
			m.sel, m.pick = i, nil
			return
		}
	}
}

// Selected returns the selected row, if any.
func (m *summaryModel) Selected() (summary.Row, bool) {
	if m.sel < 0 || m.sel >= len(m.d.Dev.Rows) {
		return summary.Row{}, false
	}
	return m.d.Dev.Rows[m.sel], true
}

// oomNote is the OOM explained under the table: the selected row's when
// it is an OOM's, else the device's latest.
func (m *summaryModel) oomNote() *oomNote {
	if r, ok := m.Selected(); ok && r.OOM != nil {
		n := explainOOM(r, m.d.Start, m.d.Total)
		n.Head, n.Selected = "selected row: "+n.Head, true
		return n
	}
	return m.d.OOM
}

// detailLines describe the selected row: its whole label, time and
// process, what can be done to it, and at an end row what held the memory
// (the agent's attribution the verdict is made from).
func (m *summaryModel) detailLines() []string { return m.rowDetail(true) }

// rowDetail is detailLines, without what held the memory when held is
// false (a short pane, where the row's verdict says it).
func (m *summaryModel) rowDetail(held bool) []string {
	r, ok := m.Selected()
	if !ok {
		return nil
	}
	st := m.styles
	what := fmt.Sprintf("selected row %d of %d: %s at %s", m.sel+1, len(m.d.Dev.Rows), r.Label, elapsed(time.Duration(r.T-m.d.Start)))
	if r.PID != 0 {
		what += fmt.Sprintf(", pid %d", r.PID)
	}
	lines := m.wrap(st.Bold.Render(what) + " " + st.Dim.Render("(r rename, x delete)"))
	// (a JAX or CuPy process's row has no torch attribution: its verdict
	// names its frameworks' holders)
	if h := r.Held; h != nil && (held || r.Verdict == nil) && (r.Allocated != nil || len(r.Frameworks) == 0) {
		var held string
		switch {
		case h.Skipped != "":
			held = "no attribution: " + h.Skipped
		case len(h.Top) == 0:
			held = fmt.Sprintf("%s allocated, none of it held by Python objects", humanBytes(h.Allocated))
		default:
			var top []string
			for _, g := range h.Top[:min(len(h.Top), 3)] {
				top = append(top, fmt.Sprintf("%s %s", g.Name, humanBytes(g.Bytes)))
			}
			held = "held by " + strings.Join(top, ", ")
			if n := len(h.Top) - 3; n > 0 {
				held += fmt.Sprintf(" (+%d more)", n)
			}
		}
		lines = append(lines, m.wrap("  "+held)...)
	} else if r.Awaiting && r.Held == nil {
		lines = append(lines, m.wrap("  "+st.Dim.Render("waiting for its agent's holders walk"))...)
	}
	return append(lines, m.detailFigures(r)...)
}

// layoutLines give torch's cache at the selected row, after its details
// (a short pane puts them after the verdicts and the OOM, which say more).
func (m *summaryModel) layoutLines() []string {
	r, ok := m.Selected()
	if !ok {
		return nil
	}
	if l := summary.RowLayoutText(r.Row); l != "" {
		return m.wrap("  " + printable.Clean(l))
	}
	return nil
}

// detailFigures are the row's values of the summary columns marked for the
// details (summary.Column.Detail), on one line: those it has a value for.
func (m *summaryModel) detailFigures(r summary.Row) []string {
	ctx := &summary.Context{Start: m.d.Start}
	var figs []string
	for _, c := range summary.Columns {
		if c.Detail == "" {
			continue
		}
		if v := c.Value.Cell(r, ctx); v != "" && v != dash {
			figs = append(figs, c.Detail+" "+v)
		}
	}
	if len(figs) == 0 {
		return nil
	}
	return m.wrap("  " + strings.Join(figs, ", "))
}
