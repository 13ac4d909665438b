// What the user does to a snapshot row: renaming it, deleting it.

package store

import (
	"slices"

	"github.com/gputop/gputop/wire"
)

// EditRow applies a rename or a delete (wire.RowEdit) to the snapshot row
// of e.PID on device e.Dev at e.T labelled e.Label: a renamed row and its
// chart marker take the new label; a deleted row and its marker go, so the
// deltas, verdicts and the CSV are worked out from the rows that are left.
// It returns the row as it was, the edit as applied (its text made
// printable) and whether the row was there.
func (s *Store) EditRow(e wire.RowEdit) (wire.Snapshot, wire.RowEdit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Type = wire.TypeRowEdit
	e.Label, e.Rename = CleanText(e.Label), CleanText(e.Rename)
	i := slices.IndexFunc(s.snapshots, func(r wire.Snapshot) bool {
		return r.Dev == e.Dev && r.PID == e.PID && r.T == e.T && r.Label == e.Label
	})
	if i < 0 {
		return wire.Snapshot{}, e, false
	}
	row := s.snapshots[i]
	kind := row.Kind
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	j := slices.IndexFunc(s.markers, func(m Marker) bool {
		return m.Dev == e.Dev && m.PID == e.PID && m.T == e.T && m.Label == e.Label && m.Kind == kind
	})
	if e.Delete {
		s.snapshots = slices.Delete(s.snapshots, i, i+1)
		if j >= 0 {
			s.markers = slices.Delete(s.markers, j, j+1)
		}
	} else {
		s.snapshots[i].Label = e.Rename
		if j >= 0 {
			s.markers[j].Label = e.Rename
		}
	}
	s.gen++
	s.rowsVer++
	return row, e, true
}
