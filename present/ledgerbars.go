// The chart's stacked view of the ledger: the selected process's rows with
// a ledger in the window, one bar each at its time.

package present

import "github.com/gputop/gputop/summary"

// LedgerBar is one row's ledger on the chart's stacked view.
type LedgerBar struct {
	T      int64
	ID     uint64 // the row's (summary.Row's ID)
	Label  string
	Ledger summary.Ledger // its parts, in wire's order: the stack from the bottom
}

// ledgerBars fills s.Ledger with the selected agent process's rows on
// s.Dev that have a ledger, in the window [From, To): at most one per
// chart cell (two data columns), the newest of those that share one, so
// a window of thousands of rows costs no more than the chart's width.
func (s *Screen) ledgerBars(q *Query) {
	sel, ok := s.SelectedProcess()
	if !ok || !sel.Agent {
		s.LedgerNote = "ledger: no agent process selected"
		return
	}
	cells := int64(max(q.Cols/2, 1))
	span := q.To - q.From
	lastCell := int64(-1)
	for _, r := range s.Rows.Rows {
		if r.PID != sel.PID || r.T < q.From || r.T >= q.To || span <= 0 {
			continue
		}
		l, ok := summary.LedgerOf(r)
		if !ok {
			continue
		}
		b := LedgerBar{T: r.T, ID: r.ID, Label: r.Label, Ledger: l}
		if cell := (r.T - q.From) * cells / span; cell == lastCell {
			s.Ledger[len(s.Ledger)-1] = b
		} else {
			s.Ledger, lastCell = append(s.Ledger, b), cell
		}
	}
	if len(s.Ledger) == 0 {
		s.LedgerNote = "ledger: pid " + sel.Label + " has no row with a ledger in this window"
	}
}
