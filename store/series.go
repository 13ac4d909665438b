package store

import "sort"

// point is one raw sample.
type point struct {
	t int64
	v uint64
}

// bucket aggregates the samples whose time falls in [start, start+width).
// Keeping min and max (not a mean) is what lets a 5 ms spike survive
// downsampling to minutes per column.
type bucket struct {
	start int64
	min   uint64
	max   uint64
	last  uint64
}

// ring is a bounded FIFO that grows up to cap, then overwrites the oldest.
type ring[T any] struct {
	buf   []T
	head  int // index of the oldest element once full
	limit int
}

func newRing[T any](limit int) ring[T] { return ring[T]{limit: limit} }

func (r *ring[T]) push(x T) {
	if len(r.buf) < r.limit {
		r.buf = append(r.buf, x)
		return
	}
	r.buf[r.head] = x
	r.head = (r.head + 1) % r.limit
}

func (r *ring[T]) len() int { return len(r.buf) }

// at returns the i-th oldest element.
func (r *ring[T]) at(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

// lastPtr returns the newest element for in-place update.
func (r *ring[T]) lastPtr() *T { return &r.buf[(r.head+len(r.buf)-1)%len(r.buf)] }

// tier is one downsampling level.
type tier struct {
	width   int64 // bucket width in nanoseconds
	buckets ring[bucket]
}

// series holds one metric: a full-resolution ring for the recent window and
// bounded tiers of min/max/last buckets for everything older.
type series struct {
	raw   ring[point]
	tiers []tier
	count uint64
	last  point
}

func newSeries(o Options) *series {
	s := &series{raw: newRing[point](o.RawCapacity)}
	for _, t := range o.Tiers {
		s.tiers = append(s.tiers, tier{width: int64(t.Width), buckets: newRing[bucket](t.Buckets)})
	}
	return s
}

func (s *series) add(t int64, v uint64) {
	if s.count > 0 && t < s.last.t {
		t = s.last.t // keep time monotonic; sources share one clock
	}
	s.raw.push(point{t, v})
	for i := range s.tiers {
		tr := &s.tiers[i]
		start := t - t%tr.width
		if tr.buckets.len() > 0 {
			b := tr.buckets.lastPtr()
			if b.start == start {
				if v < b.min {
					b.min = v
				}
				if v > b.max {
					b.max = v
				}
				b.last = v
				continue
			}
		}
		tr.buckets.push(bucket{start: start, min: v, max: v, last: v})
	}
	s.count++
	s.last = point{t, v}
}

// oldestRaw is the time of the oldest raw sample still held.
func (s *series) oldestRaw() int64 { return s.raw.at(0).t }

// valueAt returns the last value at or before t.
func (s *series) valueAt(t int64) (uint64, int64, bool) {
	if s.count == 0 {
		return 0, 0, false
	}
	n := s.raw.len()
	if t >= s.oldestRaw() {
		i := sort.Search(n, func(i int) bool { return s.raw.at(i).t > t })
		p := s.raw.at(i - 1)
		return p.v, p.t, true
	}
	for i := range s.tiers {
		tr := &s.tiers[i]
		m := tr.buckets.len()
		if m == 0 || tr.buckets.at(0).start > t {
			continue
		}
		j := sort.Search(m, func(j int) bool { return tr.buckets.at(j).start > t })
		b := tr.buckets.at(j - 1)
		return b.last, b.start, true
	}
	return 0, 0, false
}

// Column is the aggregate of the samples that fall in one chart column.
type Column struct {
	Min, Max, Last uint64
	OK             bool // false: no sample in this column
}

// columns aggregates [from, to) into n columns, from the coarsest level whose
// resolution is still at least twice finer than a column, falling back to
// coarser levels for times the finer ones no longer hold.
func (s *series) columns(from, to int64, n int) []Column {
	cols := make([]Column, n)
	if s.count == 0 || n <= 0 || to <= from {
		return cols
	}
	span := to - from
	put := func(t int64, lo, hi, last uint64) {
		if t < from || t >= to {
			return
		}
		i := int((t - from) * int64(n) / span)
		c := &cols[i]
		if !c.OK {
			*c = Column{Min: lo, Max: hi, Last: last, OK: true}
			return
		}
		if lo < c.Min {
			c.Min = lo
		}
		if hi > c.Max {
			c.Max = hi
		}
		c.Last = last
	}
	colWidth := span / int64(n)
	// level -1 is raw; levels 0.. are tiers, finest first.
	level := -1
	for i := range s.tiers {
		if s.tiers[i].width*2 <= colWidth {
			level = i
		}
	}
	cutoff := int64(1<<63 - 1) // times >= cutoff are covered by a finer level
	if level == -1 {
		n := s.raw.len()
		start := sort.Search(n, func(i int) bool { return s.raw.at(i).t >= from })
		for i := start; i < n; i++ {
			p := s.raw.at(i)
			if p.t >= to {
				break
			}
			put(p.t, p.v, p.v, p.v)
		}
		cutoff = s.oldestRaw()
		if cutoff <= from {
			return cols
		}
		level = 0
	}
	for ; level < len(s.tiers); level++ {
		tr := &s.tiers[level]
		m := tr.buckets.len()
		if m == 0 {
			continue
		}
		start := sort.Search(m, func(j int) bool { return tr.buckets.at(j).start+tr.width > from })
		for j := start; j < m; j++ {
			b := tr.buckets.at(j)
			if b.start >= to || b.start >= cutoff {
				break
			}
			t := b.start
			if t < from {
				t = from
			}
			put(t, b.min, b.max, b.last)
		}
		oldest := tr.buckets.at(0).start
		if oldest < cutoff {
			cutoff = oldest
		}
		if cutoff <= from {
			break
		}
	}
	return cols
}
