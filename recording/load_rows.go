// A recording's rows by the ids it gave them, and its row edits: an edit
// names its row by the recording's id, and the store that loads the row
// gives it an id of its own.

package recording

import "github.com/gputop/gputop/wire"

// rowIDs maps a recording's row ids to the store's.
type rowIDs struct {
	joined int               // the recording (Decoder.Joined) the ids are of
	ids    map[uint64]uint64 // the recording's id of a row -> the store's
}

// recording forgets the ids of the recording before when the frames are
// of a recording joined after it: its ids are its own.
func (r *rowIDs) recording(joined int) {
	if joined != r.joined {
		r.joined, r.ids = joined, nil
	}
}

// made notes the store's id of the row (rows, as Apply made it) that the
// recording calls id (0: the recording gave it none).
func (r *rowIDs) made(id uint64, rows []wire.Snapshot) {
	if id == 0 || len(rows) != 1 {
		return
	}
	if r.ids == nil {
		r.ids = map[uint64]uint64{}
	}
	r.ids[id] = rows[0].ID
}

// edit applies a row_edit to the row it names: by the recording's id for
// it, or, without one (recordings made before rows had ids), by its time,
// device, process and label. An edit whose row the store does not hold is
// an error of its line.
func (l *loader) edit(e wire.RowEdit) error {
	fileID := e.ID
	if fileID != 0 {
		id, ok := l.rows.ids[fileID]
		if !ok {
			return l.missing(e)
		}
		e.ID = id
	}
	if len(l.in.Apply(e.PID, e)) == 0 {
		return l.missing(e)
	}
	if e.Delete && fileID != 0 {
		delete(l.rows.ids, fileID)
	}
	return nil
}

func (l *loader) missing(e wire.RowEdit) error {
	return l.dec.errLast("row_edit frame: row_edit names no snapshot row: none labelled %q of pid %d on device %d at t %d",
		wire.Clip(e.Label, 60), e.PID, e.Dev, e.T)
}
