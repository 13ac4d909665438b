// Which pane the row keys act on (the processes or the rows), and
// how they move its selection.

package ui

type focusPane int

const (
	focusProcs focusPane = iota // ↑/↓ select a process (the chart follows it)
	focusRows                   // ↑/↓ select a row (its details show under the table)
)

// focusMark leads the first column title of the focused pane while both
// panes have rows to select.
const focusMark = "▸"

// drawnRows is what a pane's last View showed: the index of its first row
// and how many, for paging and for the mouse.
type drawnRows struct{ first, n int }

// switchFocus moves the row keys to the other pane. The rows take
// the focus only when there are rows, and start at the newest; leaving
// them drops the selection, so the table follows new rows again.
func (m *Model) switchFocus() {
	if m.focus == focusRows {
		m.focus = focusProcs
		m.table.Unselect()
		return
	}
	if len(m.table.d.Dev.Rows) == 0 {
		m.status.Set("no rows on this GPU yet (s takes one)", false)
		return
	}
	m.focus = focusRows
	if m.table.sel < 0 {
		m.table.Move(-1)
	}
	if m.table.h <= 1 {
		// no room for the rows at this size: the whole text shows the
		// selected one
		m.status.Set("rows: ↑/↓ select, "+wholeHint+"; tab: back", false)
		return
	}
	m.status.Set("rows: ↑/↓ pgup/pgdn g/G select, r rename, x delete; tab: back to processes", false)
}

// moveFocused moves the focused pane's selection by delta rows.
func (m *Model) moveFocused(delta int) {
	if m.focus == focusRows && len(m.table.d.Dev.Rows) > 0 {
		m.table.Move(delta)
		return
	}
	m.focus = focusProcs
	m.procs.move(delta)
}

// page is how many rows the focused pane showed last.
func (m *Model) page() int {
	if m.focus == focusRows {
		return max(m.table.drawn.n, 1)
	}
	return max(m.procs.drawn.n, 1)
}

// markFocus says which pane has the focus, when both have rows.
func (m *Model) markFocus() {
	both := len(m.table.d.Dev.Rows) > 0 && len(m.procs.rows) > 0
	if m.focus == focusRows && len(m.table.d.Dev.Rows) == 0 {
		m.focus = focusProcs
	}
	m.procs.marked = both && m.focus == focusProcs
	m.table.marked = both && m.focus == focusRows
}

// move moves the process selection by delta rows, clamped.
func (m *procsModel) move(delta int) {
	if len(m.rows) == 0 {
		return
	}
	i := max(m.index(), 0)
	i = int(min(max(int64(i)+int64(delta), 0), int64(len(m.rows)-1)))
	m.sel, m.chosen = m.rows[i].PID, true
}
