// The rows the store keeps: each row's identity, the holes deleted rows
// leave until they are taken out together, and the bounds on rows (how
// many are kept, how long a label is), counted.

package store

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gputop/gputop/wire"
)

// DefaultMaxRows is how many rows a store keeps (Options.MaxRows):
// far more than a run's marks, few enough that a node that runs for weeks,
// or a recording full of rows, stays within tens of MiB.
const DefaultMaxRows = 50_000

// Bounds counts what the bounds on rows and on layout histories left out.
type Bounds struct {
	MaxRows     int    // the rows kept at most (Options.MaxRows)
	RowsDropped uint64 // the oldest rows dropped to stay within MaxRows
	LabelsCut   uint64 // labels cut to wire.MaxLabelBytes
	MarkDevs    uint64 // devices of marks past wire.MaxMarkRows, given no row
	// layout readings (and runs of skips) no longer kept: past a
	// process-device's LayoutReadings newest, all but the first of each
	// minute, and past LayoutMinutes of those (layouts.go)
	LayoutsDropped uint64
	// HoldersDropped counts holders reports past an agent's newest
	// MaxHoldersPast, no longer kept for a replay's cursor
	HoldersDropped uint64
	// framework readings no longer kept (frameworks.go), as layouts
	FrameworksDropped uint64
}

// Bounds returns what the bounds on rows and layouts have left out so far.
func (s *Store) Bounds() Bounds {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.bounds
	b.MaxRows = s.opt.MaxRows
	return b
}

// label is a label from outside as a row keeps it (cutLabel), counted
// when it was cut; the first cut is logged.
func (s *Store) label(l string) string { return s.labelEnding(l, "") }

// labelEnding is label(l) followed by suffix (a phase's " (start)"): l is
// cut to leave room for it.
func (s *Store) labelEnding(l, suffix string) string {
	l, cut := cutLabel(l, wire.MaxLabelBytes-len(suffix))
	if cut {
		s.bounds.LabelsCut++
		if s.bounds.LabelsCut == 1 {
			s.note(fmt.Sprintf("a label longer than %d bytes was cut to that (wire.MaxLabelBytes), ending in %q; the summary pane counts them",
				wire.MaxLabelBytes, wire.LabelCut))
		}
	}
	return l + suffix
}

// cutLabel makes a label from outside printable and cuts it to n bytes,
// ending in wire.LabelCut, at a character boundary; it reports whether it
// was cut. Only the start of a long label is cleaned: cleaning a megabyte
// takes long, and no more than that start is kept.
func cutLabel(l string, n int) (string, bool) {
	long := len(l) > 4*n
	if long {
		l = wire.Prefix(l, 4*n)
	}
	l = CleanText(l)
	if !long && len(l) <= n {
		return l, false
	}
	return wire.Prefix(l, n-len(wire.LabelCut)) + wire.LabelCut, true
}

// isHole reports whether r is the hole a deleted row left.
func isHole(r *wire.Row) bool { return r.ID == 0 }

// putRow gives row the next ID and inserts it in time order, after the
// rows of the same time (replay may add a row before later recorded ones).
func (s *Store) putRow(row wire.Row) wire.Row {
	s.lastRow++
	row.ID = s.lastRow
	i := sort.Search(len(s.rows), func(i int) bool { return s.rows[i].T > row.T })
	s.rows = slices.Insert(s.rows, i, row)
	for j := i; j < len(s.rows); j++ {
		if id := s.rows[j].ID; id != 0 {
			s.rowIndex[id] = j
		}
	}
	s.rowsVer++
	if len(s.rows)-s.holes > s.opt.MaxRows {
		s.compactRows()
	}
	return row
}

// deleteRow leaves a hole where row i was: only its time stays, so the
// rows stay in time order for the searches. A delete costs no copying of
// the rows after it; the holes go together once they are a quarter of the
// rows.
func (s *Store) deleteRow(i int) {
	delete(s.rowIndex, s.rows[i].ID)
	s.rows[i] = wire.Row{T: s.rows[i].T}
	s.holes++
	s.rowsVer++
	if s.holes*4 > len(s.rows) {
		s.compactRows()
	}
}

// compactRows takes the holes out and, past MaxRows, drops the oldest rows
// with a sixteenth of MaxRows to spare, so that it runs again only after
// that many more rows. It drops plain rows first: a process's first row on
// a device (the baseline of its verdicts) and end rows (the verdicts) go
// only when nothing else is left to drop. A recording has every row; the
// CSV and the table have those kept.
func (s *Store) compactRows() {
	live := len(s.rows) - s.holes
	drop := 0
	if live > s.opt.MaxRows {
		drop = live - s.opt.MaxRows + s.opt.MaxRows/16
	}
	if drop > 0 {
		gone := 0
		first := map[[2]int]bool{}
		for i := range s.rows {
			r := &s.rows[i]
			if isHole(r) {
				continue
			}
			k := [2]int{r.Dev, r.PID}
			if !first[k] {
				first[k] = true
				continue
			}
			if !r.End && gone < drop {
				*r = wire.Row{T: r.T}
				gone++
			}
		}
		for i := 0; i < len(s.rows) && gone < drop; i++ {
			if r := &s.rows[i]; !isHole(r) {
				*r = wire.Row{T: r.T}
				gone++
			}
		}
		if s.bounds.RowsDropped == 0 {
			s.note(fmt.Sprintf("more than %d rows: the oldest are dropped from memory, so not in the table or the CSV (a recording keeps them); the summary pane counts them",
				s.opt.MaxRows))
		}
		s.bounds.RowsDropped += uint64(gone)
	}
	s.rows = slices.DeleteFunc(s.rows, func(r wire.Row) bool { return isHole(&r) })
	s.holes = 0
	clear(s.rowIndex)
	for i := range s.rows {
		s.rowIndex[s.rows[i].ID] = i
	}
	s.rowsVer++
}

// HasRow reports whether the row with this ID is still kept.
func (s *Store) HasRow(id uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.rowIndex[id]
	return ok
}
