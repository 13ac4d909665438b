// Seeking: the step of ← and → at every zoom, and the jumps to the
// previous and next marker.

package ui

import (
	"fmt"
	"time"

	"github.com/gputop/gputop/store"
)

// seekWindow is the window a seek moves a tenth of: the zoom's length, or
// in the whole-run zoom the whole run (the recording's length in replay,
// the run so far live), so ten presses cross it from any cursor.
func (t *timeline) seekWindow(now, start, last int64) time.Duration {
	if z := zooms[t.zoom]; z != 0 {
		return z
	}
	hi := last
	if !t.replay {
		hi = now
	}
	return max(time.Duration(hi-start), time.Second)
}

// jumpTo moves the cursor to t and holds it there (live: paused).
func (t *timeline) jumpTo(at int64) {
	t.end, t.paused = at, true
}

// jumpMarker moves the cursor to the selected GPU's next (dir > 0) or
// previous marker and selects that marker's row.
func (m *Model) jumpMarker(dir int, now int64) {
	start, last := m.st.Start(), m.st.End()
	if start == 0 {
		return
	}
	hi := last
	if !m.opt.Replay {
		hi = now
	}
	cur := m.tl.cursor(now)
	var ms []store.Marker
	var mk store.Marker
	if dir > 0 {
		ms = m.st.MarkersIn(m.dev, cur+1, hi+1)
		if len(ms) > 0 {
			mk = ms[0]
		}
	} else {
		ms = m.st.MarkersIn(m.dev, start, cur)
		if len(ms) > 0 {
			mk = ms[len(ms)-1]
		}
	}
	if len(ms) == 0 {
		where := "after"
		if dir < 0 {
			where = "before"
		}
		m.status.Set(fmt.Sprintf("no marker %s the cursor on GPU %d", where, m.dev), false)
		return
	}
	m.tl.jumpTo(mk.T)
	m.table.pick = nil
	if mk.Row != 0 {
		m.table.pick = &rowPick{id: mk.Row}
	}
	m.focus = focusRows
	m.status.Set(fmt.Sprintf("marker %q at %s (n: next, p: previous)", mk.Label, elapsed(time.Duration(mk.T-start))), false)
}
