// What the user does to a row: renaming it, deleting it.

package store

import (
	"sort"

	"github.com/gputop/gputop/wire"
)

// EditRow applies a rename or a delete (wire.RowEdit) to the row it names:
// the row whose ID is e.ID, which must still be the row of e.PID on
// device e.Dev at e.T labelled e.Label; without an ID (a recording made
// before rows had ids), the first row in time order that those fit. A
// renamed row takes the new label (as AddRow keeps labels), and so
// does its chart marker; a deleted row and its marker go, so the deltas,
// verdicts and the CSV are worked out from the rows that are left. The
// row is found through a map of IDs (or, without one, a search by time),
// so that a recording of many edits loads in time linear in its length.
// It returns the row as it was, the edit as applied (its text made
// printable, the row's ID filled in) and whether the row was there.
func (s *Store) EditRow(e wire.RowEdit) (wire.Row, wire.RowEdit, bool) {
	defer s.writeNotes()
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Type = wire.TypeRowEdit
	e.Label, _ = cutLabel(e.Label, wire.MaxLabelBytes) // as the row keeps it
	if e.Delete {
		e.Rename = CleanText(e.Rename)
	} else {
		e.Rename = s.label(e.Rename)
	}
	i := s.findRow(&e)
	if i < 0 {
		return wire.Row{}, e, false
	}
	row := s.rows[i]
	e.ID = row.ID
	if e.Delete {
		s.deleteRow(i)
	} else {
		s.rows[i].Label = e.Rename
		s.rowsVer++
	}
	s.gen++
	return row, e, true
}

// findRow returns the index of the row e names, or -1.
func (s *Store) findRow(e *wire.RowEdit) int {
	fits := func(r *wire.Row) bool {
		return !isHole(r) && r.Dev == e.Dev && r.PID == e.PID && r.T == e.T && r.Label == e.Label
	}
	if e.ID != 0 {
		if i, ok := s.rowIndex[e.ID]; ok && fits(&s.rows[i]) {
			return i
		}
		return -1
	}
	for i := sort.Search(len(s.rows), func(i int) bool { return s.rows[i].T >= e.T }); i < len(s.rows) && s.rows[i].T == e.T; i++ {
		if fits(&s.rows[i]) {
			return i
		}
	}
	return -1
}
