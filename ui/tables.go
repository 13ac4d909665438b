package ui

import (
	"slices"

	"charm.land/lipgloss/v2"
	"charm.land/lipgloss/v2/table"
	"github.com/charmbracelet/x/ansi"
)

// column describes one column of a pane's table.
type column struct {
	Title    string
	Right    bool // numbers are right aligned
	Priority int  // when the terminal is narrow, lower priorities go first
	Flex     bool // this column is shortened (not dropped) to fit
	// Short, on the flex column: its title where the whole one would be cut
	Short string
}

// tableSpec is what a pane hands to renderTable.
type tableSpec struct {
	Cols     []column
	Rows     [][]string
	Width    int
	Selected int // row index to highlight; -1 for none
	// CellStyle, when set, may override the style of a data cell.
	CellStyle func(row, col int, cell string) (lipgloss.Style, bool)
}

const cellPad = 2

// fitColumns decides which columns fit in w cells: it drops the lowest
// priorities first, then shortens the flex column. It returns the kept
// column indexes and the width the flex column may use (0: no limit).
func fitColumns(cols []column, rows [][]string, w int) (keep []int, flexW int) {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = ansi.StringWidth(c.Title)
		for _, r := range rows {
			if i < len(r) {
				widths[i] = max(widths[i], ansi.StringWidth(r[i]))
			}
		}
	}
	for i := range cols {
		keep = append(keep, i)
	}
	total := func() int {
		t := 0
		for _, i := range keep {
			t += widths[i] + cellPad
		}
		return t - cellPad
	}
	minFlex := 0
	flex := -1
	for i, c := range cols {
		if c.Flex {
			flex = i
			minFlex = min(widths[i], 12)
		}
	}
	for total()-(func() int {
		if flex >= 0 {
			return widths[flex] - minFlex
		}
		return 0
	}()) > w && len(keep) > 1 {
		// drop the lowest priority column that is not the flex one
		drop := -1
		for k, i := range keep {
			if i == flex {
				continue
			}
			if drop < 0 || cols[i].Priority < cols[keep[drop]].Priority {
				drop = k
			}
		}
		if drop < 0 {
			break
		}
		keep = append(keep[:drop], keep[drop+1:]...)
	}
	if t := total(); t > w && flex >= 0 {
		flexW = max(widths[flex]-(t-w), 3)
	}
	return keep, flexW
}

// tableCache keeps a pane's last rendered table: panes are drawn every time
// the screen changes, and most of the time their table did not.
type tableCache struct {
	cols     []column
	rows     [][]string
	width    int
	selected int
	out      string
	ok       bool
}

func sameRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// render is renderTable, skipped when the spec is the one drawn last.
func (c *tableCache) render(st *Styles, spec tableSpec) string {
	if c.ok && c.width == spec.Width && c.selected == spec.Selected &&
		slices.Equal(c.cols, spec.Cols) && sameRows(c.rows, spec.Rows) {
		return c.out
	}
	c.out = renderTable(st, spec)
	c.cols, c.rows, c.width, c.selected, c.ok = spec.Cols, spec.Rows, spec.Width, spec.Selected, true
	return c.out
}

// renderTable draws a borderless table (lipgloss/table) that fits w cells.
func renderTable(st *Styles, spec tableSpec) string {
	keep, flexW := fitColumns(spec.Cols, spec.Rows, spec.Width)
	headers := make([]string, len(keep))
	for k, i := range keep {
		headers[k] = spec.Cols[i].Title
		if flexW > 0 && spec.Cols[i].Flex {
			if sh := spec.Cols[i].Short; sh != "" && ansi.StringWidth(headers[k]) > flexW {
				headers[k] = sh
			}
			headers[k] = truncate(headers[k], flexW)
		}
	}
	rows := make([][]string, len(spec.Rows))
	for r, row := range spec.Rows {
		out := make([]string, len(keep))
		for k, i := range keep {
			if i < len(row) {
				out[k] = row[i]
				if flexW > 0 && spec.Cols[i].Flex {
					out[k] = truncate(out[k], flexW)
				}
			}
		}
		rows[r] = out
	}
	t := table.New().
		Border(lipgloss.HiddenBorder()).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderColumn(false).BorderHeader(false).
		Wrap(false).
		Headers(headers...).
		Rows(rows...).
		StyleFunc(func(row, col int) lipgloss.Style {
			c := spec.Cols[keep[col]]
			var s lipgloss.Style
			switch {
			case row == table.HeaderRow:
				s = st.TableHeader
			case row == spec.Selected:
				s = st.RowSelected
			default:
				s = st.Cell
				if spec.CellStyle != nil && row < len(rows) {
					if cs, ok := spec.CellStyle(row, keep[col], rows[row][col]); ok {
						s = cs
					}
				} else if row < len(rows) && rows[row][col] == dash {
					s = st.Missing
				}
			}
			if c.Right {
				s = s.Align(lipgloss.Right)
			}
			if col < len(keep)-1 {
				s = s.PaddingRight(cellPad)
			}
			return s
		})
	return t.Render()
}
