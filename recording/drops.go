// What a Writer could not write: counted, and written as dropped lines
// where the gap is.

package recording

import (
	"fmt"
	"strings"

	"github.com/gputop/gputop/wire"
)

// Stats counts what a Writer has done so far.
type Stats struct {
	Lines               uint64 // lines written, header and dropped lines included
	Bytes               uint64 // bytes written
	Samples             uint64 // NVML samples written
	DroppedSamples      uint64 // NVML samples not written: queue full, or after a write error
	DroppedAgentSamples uint64 // agent samples not written: queue full, or after a write error
	DroppedFrames       uint64 // other frames not written: queue full, or after a write error
	DroppedTooLong      uint64 // frames not written because their line would be over MaxLineBytes
	AgentSamples        uint64 // agent samples written
}

// Drops returns the dropped counts.
func (s Stats) Drops() Drops {
	return Drops{NVMLSamples: s.DroppedSamples, AgentSamples: s.DroppedAgentSamples, Frames: s.DroppedFrames, TooLong: s.DroppedTooLong}
}

// TypeDropped is the type of the recorder's own dropped lines.
const TypeDropped = "dropped"

// Drops counts what a recorder could not write. The first three are what
// an output that fell behind cost; TooLong is frames whose line would have
// been longer than MaxLineBytes, however fast the output.
type Drops struct {
	NVMLSamples  uint64 `json:"nvml_samples,omitempty"`
	AgentSamples uint64 `json:"agent_samples,omitempty"`
	Frames       uint64 `json:"frames,omitempty"` // frames other than samples
	TooLong      uint64 `json:"too_long,omitempty"`
}

// Any reports whether anything was dropped.
func (d Drops) Any() bool { return d != Drops{} }

// Behind is the part of d that the output falling behind cost (all but
// TooLong).
func (d Drops) Behind() Drops { d.TooLong = 0; return d }

// TooLongText says n frames were too long for a recording line, with the
// limit.
func TooLongText(n uint64) string {
	s := "s"
	if n == 1 {
		s = ""
	}
	return fmt.Sprintf("%d frame%s longer than a recording line may be (%d MiB)", n, s, MaxLineBytes>>20)
}

// String lists the counts that are not 0: "12 NVML samples and 1 other
// frame", "1 frame longer than a recording line may be (4 MiB)".
func (d Drops) String() string {
	var parts []string
	for _, c := range []struct {
		n    uint64
		what string
	}{{d.NVMLSamples, "NVML sample"}, {d.AgentSamples, "agent sample"}, {d.Frames, "other frame"}} {
		if c.n > 0 {
			s := fmt.Sprintf("%d %s", c.n, c.what)
			if c.n > 1 {
				s += "s"
			}
			parts = append(parts, s)
		}
	}
	if d.TooLong > 0 {
		parts = append(parts, TooLongText(d.TooLong))
	}
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func (d *Drops) add(o Drops) {
	d.NVMLSamples += o.NVMLSamples
	d.AgentSamples += o.AgentSamples
	d.Frames += o.Frames
	d.TooLong += o.TooLong
}

func (d Drops) minus(o Drops) Drops {
	return Drops{NVMLSamples: d.NVMLSamples - o.NVMLSamples, AgentSamples: d.AgentSamples - o.AgentSamples, Frames: d.Frames - o.Frames, TooLong: d.TooLong - o.TooLong}
}

// Dropped is a recording line of the writer's own: what it could not write
// since its previous Dropped line (see FORMAT.md). It is written as soon as
// the output takes lines again, so it sits where the gap is; T is the
// newest sample time the writer had then.
type Dropped struct {
	Type string `json:"type"`
	T    int64  `json:"t"`
	Drops
}

// noteDrops writes a Dropped line for what was dropped since the last one.
// The line bypasses the queue, which may be full: the goroutine writes it
// itself, between chunks, so it lands where the gap is.
func (w *Writer) noteDrops() {
	w.mu.Lock()
	d := w.stats.Drops().minus(w.noted)
	failed, t := w.err != nil, w.latest
	w.mu.Unlock()
	if !d.Any() || failed {
		return
	}
	n, err := w.writeItem(item{f: Dropped{Type: TypeDropped, T: t, Drops: d}})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gaveUp {
		return
	}
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	w.noted.add(d)
	w.stats.Lines++
	w.stats.Bytes += uint64(n)
}

// DropSummary is what a closed Writer says of what it could not write, for
// the line a recorder ends with ("" when nothing was dropped): the counts,
// and whether the file says so too (it cannot after ErrStalled).
func (w *Writer) DropSummary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.stats.Drops()
	switch {
	case !d.Any():
		return ""
	case w.gaveUp:
		return fmt.Sprintf("not everything was written: dropped %s (the file ends where the output stopped taking lines, and loads up to there)", d)
	}
	return fmt.Sprintf("not everything was written: dropped %s (the file says so, and loads)", d)
}

func countDropped(st *Stats, it item) {
	switch {
	case it.b != nil:
		st.DroppedSamples += uint64(len(it.b.dt))
	case it.s != nil:
		st.DroppedAgentSamples += uint64(len(it.s.dt))
	default:
		st.DroppedFrames++
	}
}

func (f Dropped) FrameType() string { return TypeDropped }
func (f Dropped) Typed() wire.Frame { f.Type = TypeDropped; return f }

// maxUnwritten bounds the row ids a Writer remembers as not written.
const maxUnwritten = 1 << 16

// unwritten are the rows (by ID) a Writer dropped: an edit of one is
// dropped too, since the file has no row for it to name. Past
// maxUnwritten ids, every row up to the newest dropped counts as dropped
// (an edit of one of them is dropped though its row may be in the file).
type unwritten struct {
	ids     map[uint64]bool
	through uint64
}

// add notes the row of f (a row, an OOM's) as not written.
func (u *unwritten) add(f any) {
	var id uint64
	switch v := f.(type) {
	case wire.Row:
		id = v.ID
	case wire.OOM:
		id = v.Row
	}
	switch {
	case id == 0:
	case len(u.ids) < maxUnwritten:
		if u.ids == nil {
			u.ids = map[uint64]bool{}
		}
		u.ids[id] = true
	default:
		u.through = max(u.through, id)
	}
}

// has reports whether the row with this id was not written.
func (u *unwritten) has(id uint64) bool { return id != 0 && (u.ids[id] || id <= u.through) }

// editOfUnwritten reports whether it is an edit of a row not written
// (dropped while the edit waited in the queue).
func (w *Writer) editOfUnwritten(it item) bool {
	e, ok := it.f.(wire.RowEdit)
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rows.has(e.ID)
}
