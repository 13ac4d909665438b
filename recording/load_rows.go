// A recording's rows by the ids it gave them, and its row edits: an edit
// names its row by the recording's id, and the store that loads the row
// gives it an id of its own.

package recording

import (
	"fmt"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// maxWarnings bounds the warnings Info keeps (Info.Warned counts all).
const maxWarnings = 20

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
func (r *rowIDs) made(id uint64, rows []wire.Row, st *store.Store) {
	if id == 0 || len(rows) != 1 {
		return
	}
	if r.ids == nil {
		r.ids = map[uint64]uint64{}
	}
	r.ids[id] = rows[0].ID
	// forget the rows the store no longer keeps (store.Options.MaxRows),
	// so that the map stays about as small as the store's rows
	if len(r.ids) > 2*st.Shape().RowCount+1024 {
		for k, v := range r.ids {
			if !st.HasRow(v) {
				delete(r.ids, k)
			}
		}
	}
}

// edit applies a row_edit to the row it names: by the recording's id for
// it, or, without one (recordings made before rows had ids), by its time,
// device, process and label. An edit whose row the store does not hold is
// skipped with a warning naming its line, whether or not the recorder
// dropped lines: an edit without its row changes nothing, and refusing the
// line would lose every line after it.
func (l *loader) edit(e wire.RowEdit) {
	fileID := e.ID
	if fileID != 0 {
		id, ok := l.rows.ids[fileID]
		if !ok {
			l.skipEdit(e, false)
			return
		}
		e.ID = id
	}
	if len(l.in.Apply(e.PID, e)) == 0 {
		l.skipEdit(e, fileID != 0)
		return
	}
	if e.Delete && fileID != 0 {
		delete(l.rows.ids, fileID)
	}
}

// skipEdit warns of an edit whose row is not in the store; loaded says the
// recording had the row (so the store has let it go since: a store that
// has let rows go forgets their ids too).
func (l *loader) skipEdit(e wire.RowEdit, loaded bool) {
	why := "the recording has no such row before it"
	switch {
	case loaded || l.st.Bounds().RowsDropped > 0:
		why = fmt.Sprintf("its row is no longer kept (gputop keeps the newest %d rows)", l.st.Bounds().MaxRows)
	case l.info.Dropped.Any():
		why = fmt.Sprintf("its row is not in the recording: the recorder dropped %s before this line (its output did not keep up), the row likely among them", l.info.Dropped)
	}
	what := "rename"
	if e.Delete {
		what = "delete"
	}
	l.warn(fmt.Sprintf("%s: line %d: skipped a row_edit (%s of the row %q of pid %d on device %d at t %d): %s",
		l.dec.name, l.dec.Line(), what, wire.Clip(e.Label, 60), e.PID, e.Dev, e.T, why))
}

// warn adds a warning to Info.
func (l *loader) warn(w string) {
	l.info.Warned++
	if len(l.info.Warnings) < maxWarnings {
		l.info.Warnings = append(l.info.Warnings, w)
	}
}
