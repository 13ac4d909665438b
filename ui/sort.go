// The process pane's order: a key cycles it, the sorted column's title
// says it.

package ui

import "github.com/gputop/gputop/view"

// sortTitle is a column title of the process pane, with the sort's arrow
// when the pane is sorted on it (▲ ascending, ▼ the largest first), and
// the focus mark on the first column.
func (m *procsModel) sortTitle(title string, by view.ProcessOrder) string {
	if m.order == by {
		if by == view.ByPID {
			title += "▲"
		} else {
			title += "▼"
		}
	}
	if by == view.ByPID && m.marked {
		title = focusMark + title
	}
	return title
}

// cycleOrder sorts the pane on the next key; the selected process stays
// selected.
func (m *procsModel) cycleOrder() {
	m.order = m.order.Next()
	view.SortProcesses(m.rows, m.order)
}

// orderName says what the pane is sorted on, for the status line.
func orderName(o view.ProcessOrder) string {
	switch o {
	case view.ByUsed:
		return "NVML used, the most first"
	case view.ByAllocated:
		return "allocated (torch), the most first"
	}
	return "pid"
}
