// The caching allocator's layout per agent process and device: its
// readings over time (the newest as they came, older ones the first of
// each minute),
// the reasons given when there was none, and the layout a row takes.

package store

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/gputop/gputop/wire"
)

// The bounds on one process-device's layout history (see AgentLayout).
// An agent reads a layout once a second by default: LayoutReadings covers
// about 34 minutes as they came, LayoutMinutes a day after that, one
// reading a minute.
const (
	LayoutReadings = 2048 // the newest readings, kept as they came
	LayoutMinutes  = 1440 // older readings kept, the first of each minute
	LayoutSkips    = 2048 // runs of skipped readings kept, the newest
)

// layoutMinute is the span of which one older reading is kept.
const layoutMinute = int64(time.Minute)

// layoutHist is one process-device's layout history. Times never go back
// (a reading older than the newest frame is filed at the newest frame's
// time, as series do), so each ring is in time order.
type layoutHist struct {
	readings thinned[wire.Layout] // the newest LayoutReadings, then one a minute
	skips    ring[layoutSkip]     // runs of frames with no reading, by their first frame
	last     int64                // the newest frame's time
	frames   bool                 // a frame has come (last is set)
	skipped  bool                 // the newest frame was a skip: skips' newest run goes on
}

// layoutSkip is a run of layout frames that carried no reading, each
// with the same reason: from its first frame until the next reading or
// another reason.
type layoutSkip struct {
	from   int64
	reason string
}

type layoutKey struct{ pid, dev int }

func newLayoutHist() *layoutHist {
	return &layoutHist{readings: newThinned(LayoutReadings, LayoutMinutes, func(l wire.Layout) int64 { return l.T }),
		skips: newRing[layoutSkip](LayoutSkips)}
}

// LayoutAt is the layout of one agent process on one device at a time.
type LayoutAt struct {
	// Layout is the newest reading at or before the time (its T says when
	// it was read), when OK. Its Pools and Settings are the store's: read,
	// never change them.
	Layout wire.Layout
	OK     bool
	// Skipped, when set, is why the newest layout frame at or before the
	// time carried no reading (the reading would have cost too much, the
	// torch version has none...), since SkippedAt: Layout is then older
	// than that.
	Skipped   string
	SkippedAt int64
}

// AgentLayout keeps a layout frame of agent process pid (r.Dev is its
// torch index): a reading goes into the process-device's history and its
// largest free block into the LargestFree series; a skip notes its
// reason. It returns the frame as kept (its text made printable, its
// process filled in) and whether it was kept (its process and device
// known). Each process-device keeps its LayoutReadings newest readings,
// older ones the first of each minute for LayoutMinutes minutes, and its
// LayoutSkips newest runs of skips; what falls out is counted in
// Bounds.LayoutsDropped, and logged the first time.
func (s *Store) AgentLayout(pid int, r wire.LayoutReading) (wire.LayoutReading, bool) {
	defer s.writeNotes()
	r.PID = pid
	r.Skipped = clipText(CleanText(r.Skipped), wire.MaxSettingBytes)
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return r, false
	}
	dev, ok := a.DevMap[r.Dev]
	if !ok {
		return r, false
	}
	k := layoutKey{pid, dev}
	h := s.layouts[k]
	if h == nil {
		h = newLayoutHist()
		s.layouts[k] = h
	}
	t := r.T
	if h.frames && t < h.last {
		t = h.last
	}
	h.last, h.frames = t, true
	if r.Skipped != "" {
		r.Layout = wire.Layout{T: r.T}
		n := h.skips.len()
		same := n > 0 && h.skips.at(n-1).reason == r.Skipped
		if !h.skipped || !same {
			reason := r.Skipped
			if same {
				reason = h.skips.at(n - 1).reason // one copy of a reason that comes back
			}
			if n == LayoutSkips {
				s.layoutsDropped(1)
			}
			h.skips.push(layoutSkip{from: t, reason: reason})
		}
		h.skipped = true
		s.touch(r.T)
		return r, true
	}
	l := *cleanLayout(&r.Layout)
	if prev, ok := h.readings.newest(); ok && reflect.DeepEqual(prev.Settings, l.Settings) {
		l.Settings = prev.Settings // the settings rarely change: one copy while they do not
	}
	r.Layout = l
	l.T = t
	if h.readings.push(l) {
		s.layoutsDropped(1)
	}
	h.skipped = false
	s.add(Key{dev, pid, LargestFree}, t, l.LargestFree)
	s.touch(r.T)
	return r, true
}

// layoutsDropped counts n readings or skip runs no longer kept; the
// caller holds the lock.
func (s *Store) layoutsDropped(n uint64) {
	if s.bounds.LayoutsDropped == 0 {
		s.note(fmt.Sprintf("allocator layouts: a process's newest %d readings per device are kept, then one a minute for %d minutes; older ones are dropped from memory (a recording keeps them)",
			LayoutReadings, LayoutMinutes))
	}
	s.bounds.LayoutsDropped += n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// LayoutAt returns the layout of agent process pid on store device dev at
// time t: the newest reading at or before t and, when the newest frame at
// or before t was a skip, its reason. The same for live and replay.
func (s *Store) LayoutAt(pid, dev int, t int64) LayoutAt {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.layoutAt(pid, dev, t)
}

// LatestLayout is LayoutAt the newest frame.
func (s *Store) LatestLayout(pid, dev int) LayoutAt { return s.LayoutAt(pid, dev, math.MaxInt64) }

// layoutAt is LayoutAt; the caller holds the lock.
func (s *Store) layoutAt(pid, dev int, t int64) LayoutAt {
	var at LayoutAt
	h := s.layouts[layoutKey{pid, dev}]
	if h == nil {
		return at
	}
	at.Layout, at.OK = h.readings.at(t)
	n := h.skips.len()
	i := sort.Search(n, func(i int) bool { return h.skips.at(i).from > t })
	if i > 0 {
		if sk := h.skips.at(i - 1); !at.OK || sk.from > at.Layout.T {
			at.Skipped, at.SkippedAt = sk.reason, sk.from
		}
	}
	return at
}

// rowLayout is the layout a row of pid on dev at t takes when it came
// with none: the newest reading then (nil: none); the caller holds the
// lock.
func (s *Store) rowLayout(pid, dev int, t int64) *wire.Layout {
	if pid <= 0 {
		return nil
	}
	if at := s.layoutAt(pid, dev, t); at.OK {
		return &at.Layout
	}
	return nil
}

// cleanLayout copies a layout from outside with its text made printable
// and its lists cut to the wire's bounds (nil stays nil).
func cleanLayout(l *wire.Layout) *wire.Layout {
	if l == nil {
		return nil
	}
	c := *l
	if len(c.Pools) > wire.MaxPools {
		c.PoolsCut += len(c.Pools) - wire.MaxPools
		c.Pools = c.Pools[:wire.MaxPools]
	}
	c.Pools = slices.Clip(slices.Clone(c.Pools))
	for i := range c.Pools {
		p := &c.Pools[i]
		p.Kind, p.ID = CleanText(p.Kind), clipText(CleanText(p.ID), wire.MaxPoolIDBytes)
	}
	if l.Settings != nil {
		st := *l.Settings
		st.From = CleanText(st.From)
		st.Env = clipText(CleanText(st.Env), wire.MaxSettingBytes)
		st.Conf = clipText(CleanText(st.Conf), wire.MaxSettingBytes)
		st.Items = slices.Clip(slices.Clone(st.Items[:min(len(st.Items), wire.MaxSettings)]))
		for i := range st.Items {
			it := &st.Items[i]
			it.Name = clipText(CleanText(it.Name), wire.MaxSettingBytes)
			it.Value = clipText(CleanText(it.Value), wire.MaxSettingBytes)
		}
		if st.Expandable != nil {
			e := *st.Expandable
			st.Expandable = &e
		}
		c.Settings = &st
	}
	return &c
}

// dropLayouts forgets a process's layout histories; the caller holds the
// lock.
func (s *Store) dropLayouts(pid int) {
	for k := range s.layouts {
		if k.pid == pid {
			delete(s.layouts, k)
		}
	}
}
