// The rows the store keeps: each row's identity, and the holes deleted
// rows leave until they are taken out together.

package store

import (
	"slices"
	"sort"

	"github.com/gputop/gputop/wire"
)

// isHole reports whether r is the hole a deleted row left.
func isHole(r *wire.Snapshot) bool { return r.ID == 0 }

// putRow gives row the next ID and inserts it in time order, after the
// rows of the same time (replay may add a row before later recorded ones).
func (s *Store) putRow(row wire.Snapshot) wire.Snapshot {
	s.lastRow++
	row.ID = s.lastRow
	i := sort.Search(len(s.snapshots), func(i int) bool { return s.snapshots[i].T > row.T })
	s.snapshots = slices.Insert(s.snapshots, i, row)
	for j := i; j < len(s.snapshots); j++ {
		if id := s.snapshots[j].ID; id != 0 {
			s.rowIndex[id] = j
		}
	}
	s.rowsVer++
	return row
}

// deleteRow leaves a hole where row i was: only its time stays, so the
// rows stay in time order for the searches. A delete costs no copying of
// the rows after it; the holes go together once they are a quarter of the
// rows.
func (s *Store) deleteRow(i int) {
	delete(s.rowIndex, s.snapshots[i].ID)
	s.snapshots[i] = wire.Snapshot{T: s.snapshots[i].T}
	s.holes++
	s.rowsVer++
	if s.holes*4 > len(s.snapshots) {
		s.compactRows()
	}
}

// compactRows takes the holes out.
func (s *Store) compactRows() {
	s.snapshots = slices.DeleteFunc(s.snapshots, func(r wire.Snapshot) bool { return isHole(&r) })
	s.holes = 0
	clear(s.rowIndex)
	for i := range s.snapshots {
		s.rowIndex[s.snapshots[i].ID] = i
	}
	s.rowsVer++
}
