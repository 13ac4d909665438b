// The process pane's order: a key cycles it, the sorted column's title
// says it.

package ui

import "github.com/gputop/gputop/present"

// sortTitle is a column title of the process pane, with the sort's arrow
// when the pane is sorted on it (▲ ascending, ▼ the largest first), and
// the focus mark on the first column.
func (m *procsModel) sortTitle(title string, by present.ProcessOrder) string {
	if m.order == by {
		if by == present.ByPID {
			title += "▲"
		} else {
			title += "▼"
		}
	}
	if by == present.ByPID && m.marked {
		title = focusMark + title
	}
	return title
}

// cycleOrder sorts the pane on the next key; the selected process stays
// selected.
func (m *procsModel) cycleOrder() {
	m.order = m.order.Next()
	present.SortProcesses(m.rows, m.order)
}

// orderName says what the pane is sorted on, for the status line.
func orderName(o present.ProcessOrder) string {
	switch o {
	case present.ByUsed:
		return "NVML used, the most first"
	case present.ByAllocated:
		return "allocated (torch), the most first"
	}
	return "pid"
}
