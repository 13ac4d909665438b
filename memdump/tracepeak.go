// The highest point of a dump's allocation history: torch's trace replayed
// backwards from the blocks live at the dump (an alloc undone takes its
// block away, a completed free gives it back), the level of allocated
// bytes followed to its highest, and the blocks live there grouped by the
// frame that allocated them, as memory_viz's timeline counts (alloc and
// free_completed).

package memdump

import (
	"cmp"
	"slices"
)

// TracePeak is a device's highest allocated point over its trace.
type TracePeak struct {
	// Allocated: the bytes in blocks live then, as the trace counts them
	// (the blocks live at the dump and the trace's allocs and frees)
	Allocated uint64
	// Now: the highest point is the dump's own moment (the trace never
	// went higher before it); Live is then the dump's Live.
	Now bool
	// AtStart: the highest point is at the trace's first entry or before
	// it (the trace holds only the last max_entries events)
	AtStart bool
	TimeUS  int64   // the time of the entry after which it was highest (torch's time_us); 0 when Now or AtStart
	LastUS  int64   // the time of the trace's last alloc or free
	Label   string  // that entry's user_metadata (the gputop row or phase then)
	Live    []Group // the blocks live then, by allocating frame, largest first
	// Unknown: bytes of blocks live then whose allocation came before the
	// trace's first entry and that were freed since: no frame known
	Unknown uint64
}

// traceStep is an alloc or a free_completed entry of a trace.
type traceStep struct {
	alloc  bool
	addr   uint64
	size   uint64
	frame  int // alloc: the allocating frame's id
	timeUS int64
	label  string
}

// liveBlock is a block in use at the dump.
type liveBlock struct {
	size  uint64
	frame int
}

func keepLive(m map[int]map[uint64]liveBlock, dev int, addr uint64, b liveBlock) {
	if m[dev] == nil {
		m[dev] = map[uint64]liveBlock{}
	}
	m[dev][addr] = b
}

// unknownFrame marks a block given back by a free whose alloc the trace
// does not hold.
const unknownFrame = -1

// tracePeak replays steps (oldest first) backwards from live, the blocks
// in use at the dump.
func tracePeak(steps []traceStep, live map[uint64]liveBlock, byID []Frame) *TracePeak {
	var level uint64
	for _, b := range live {
		level += b.size
	}
	// first pass: the highest level and where (after steps[:at])
	peak, at := level, len(steps)
	for i := len(steps) - 1; i >= 0; i-- {
		s := &steps[i]
		if s.alloc {
			level -= min(level, s.size)
		} else {
			level += s.size
		}
		if level > peak {
			peak, at = level, i
		}
	}
	tp := &TracePeak{Allocated: peak, Now: at == len(steps), AtStart: at == 0}
	if len(steps) > 0 {
		tp.LastUS = steps[len(steps)-1].timeUS
	}
	if tp.Now {
		return tp
	}
	if at > 0 {
		tp.TimeUS, tp.Label = steps[at-1].timeUS, steps[at-1].label
	}
	// second pass: the blocks live then
	set := make(map[uint64]liveBlock, len(live))
	for a, b := range live {
		set[a] = b
	}
	for i := len(steps) - 1; i >= at; i-- {
		s := &steps[i]
		if s.alloc {
			delete(set, s.addr)
		} else {
			set[s.addr] = liveBlock{size: s.size, frame: unknownFrame}
		}
	}
	// a block given back by a free was allocated at the latest alloc of
	// its address before the peak
	allocAt := map[uint64]int{}
	for _, s := range steps[:at] {
		if s.alloc {
			allocAt[s.addr] = s.frame
		}
	}
	byFrame := map[int]*Group{}
	for a, b := range set {
		f := b.frame
		if f == unknownFrame {
			var ok bool
			if f, ok = allocAt[a]; !ok {
				tp.Unknown += b.size
				continue
			}
		}
		g := byFrame[f]
		if g == nil {
			g = &Group{Frame: byID[f]}
			byFrame[f] = g
		}
		g.Bytes += b.size
		g.Blocks++
	}
	for _, g := range byFrame {
		tp.Live = append(tp.Live, *g)
	}
	slices.SortFunc(tp.Live, func(a, b Group) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Blocks, a.Blocks); c != 0 {
			return c
		}
		return cmpFrame(a.Frame, b.Frame)
	})
	return tp
}
