package store

import (
	"math/bits"
	"sort"
)

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

// ring is a bounded FIFO that grows up to limit, then overwrites the oldest.
type ring[T any] struct {
	buf   []T
	head  int // index of the oldest element once full
	limit int
}

func newRing[T any](limit int) ring[T] { return ring[T]{limit: limit} }

func (r *ring[T]) push(x T) {
	if len(r.buf) < r.limit {
		if len(r.buf) == cap(r.buf) {
			// Grow by hand so the backing array ends at exactly limit
			// elements: append's own growth would overshoot it by up to 25%
			// and that slack would be held for the whole run.
			c := min(max(2*cap(r.buf), 64), r.limit)
			nb := make([]T, len(r.buf), c)
			copy(nb, r.buf)
			r.buf = nb
		}
		r.buf = append(r.buf, x)
		return
	}
	r.buf[r.head] = x
	r.head++
	if r.head == r.limit {
		r.head = 0
	}
}

func (r *ring[T]) len() int { return len(r.buf) }

// at returns the i-th oldest element.
func (r *ring[T]) at(i int) T {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return r.buf[j]
}

// lastPtr returns the newest element for in-place update.
func (r *ring[T]) lastPtr() *T {
	j := r.head - 1
	if j < 0 {
		j = len(r.buf) - 1
	}
	return &r.buf[j]
}

// tier is one downsampling level.
type tier struct {
	width   int64 // bucket width in nanoseconds
	buckets ring[bucket]
}

// series holds one metric: a full-resolution ring for the recent window and
// bounded tiers of min/max/last buckets for everything older. Every sample
// goes into the raw ring and into every tier, so each level covers
// everything from its oldest element up to now.
type series struct {
	raw   ring[point]
	tiers []tier // finest first
	count uint64
	first int64 // time of the first sample ever, for "nothing before it"
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
	if s.count == 0 {
		s.first = t
	}
	s.raw.push(point{t, v})
	for i := range s.tiers {
		tr := &s.tiers[i]
		if tr.buckets.len() > 0 {
			// Most samples land in the current bucket; checking that first
			// saves a 64-bit division per tier on the 1 kHz path.
			b := tr.buckets.lastPtr()
			if t < b.start+tr.width {
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
		start := t - t%tr.width
		if t < 0 && t%tr.width != 0 {
			start -= tr.width // floor, not truncation, for times before 1970
		}
		tr.buckets.push(bucket{start: start, min: v, max: v, last: v})
	}
	s.count++
	s.last = point{t, v}
}

// oldestRaw is the time of the oldest raw sample still held.
func (s *series) oldestRaw() int64 { return s.raw.at(0).t }

// oldest is the earliest time from which level l holds every sample:
// level 0 is the raw ring, level i>0 is tier i-1.
func (s *series) oldest(l int) int64 {
	if l == 0 {
		return s.oldestRaw()
	}
	return s.tiers[l-1].buckets.at(0).start
}

// searchRaw returns the index of the first raw sample with time >= t.
func (s *series) searchRaw(t int64) int {
	return sort.Search(s.raw.len(), func(i int) bool { return s.raw.at(i).t >= t })
}

// valueAt returns the last value at or before t and its time. Inside the
// raw window it is exact. Older than that it comes from the finest tier that
// reaches back to t: the last value of its newest bucket starting at or
// before t, with the bucket's start as its time, so the value may have been
// sampled up to one bucket width after t.
func (s *series) valueAt(t int64) (uint64, int64, bool) {
	if s.count == 0 || t < s.first {
		return 0, 0, false
	}
	if t >= s.oldestRaw() {
		i := sort.Search(s.raw.len(), func(i int) bool { return s.raw.at(i).t > t })
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
// From raw samples it is exact. Where tiers answer, a bucket counts in every
// column its span overlaps: Min and Max never miss a sample of the column
// and may include samples up to one bucket width outside it (buckets are at
// most half a column wide unless the window is older than the finer tiers
// keep), and Last is the last value of the newest bucket overlapping it.
type Column struct {
	Min, Max, Last uint64
	OK             bool // false: no sample in this column
}

// columns aggregates [from, to) into n columns. It reads the coarsest level
// whose buckets are at most half a column wide (raw if none is), and falls
// back to coarser levels for times the finer ones no longer hold.
//
// A bucket counts in every column its time span overlaps, so a column's Min
// and Max bound the samples in it (they may include samples up to one bucket
// width outside it, never miss one inside it) and a window older than the
// finer levels still has no gaps. Last is the newest value known for the
// column: exact from raw samples, a bucket's last value from a tier.
func (s *series) columns(from, to int64, n int) []Column {
	if n <= 0 {
		return nil
	}
	cols := make([]Column, n)
	if s.count == 0 || to <= from {
		return cols
	}
	// Unsigned arithmetic: to-from and t-from fit in a uint64 even when the
	// caller asks for the whole int64 range.
	span := uint64(to) - uint64(from)
	col := func(t int64) int {
		hi, lo := bits.Mul64(uint64(t)-uint64(from), uint64(n))
		q, _ := bits.Div64(hi, lo, span)
		return int(q)
	}
	merge := func(i int, lo, hi, last uint64) {
		c := &cols[i]
		if !c.OK {
			*c = Column{Min: lo, Max: hi, Last: last, OK: true}
			return
		}
		c.Min = min(c.Min, lo)
		c.Max = max(c.Max, hi)
		c.Last = last
	}

	colWidth := int64(span / uint64(n))
	level := 0 // 0 is raw, i>0 is tier i-1
	for i := range s.tiers {
		if s.tiers[i].width <= colWidth/2 {
			level = i + 1
		}
	}
	// Work out which level serves which part of the window, newest first,
	// then fill oldest first so that each column's Last ends up the newest.
	type seg struct {
		level  int
		lo, hi int64
	}
	var segs [8]seg
	parts := segs[:0]
	// A bucket's span reaches before the first sample and past the newest
	// one; columns there hold nothing and must stay empty.
	lo := max(from, s.first)
	hi := min(to, s.last.t+1)
	for l := level; l <= len(s.tiers) && hi > lo; l++ {
		o := s.oldest(l)
		if max(o, lo) < hi {
			parts = append(parts, seg{l, max(o, lo), hi})
		}
		hi = min(hi, o)
	}
	// colStart is the first time that falls in column i (i <= n).
	colStart := func(i int) int64 {
		hi, lo := bits.Mul64(uint64(i), span)
		q, r := bits.Div64(hi, lo, uint64(n))
		if r != 0 {
			q++
		}
		return int64(uint64(from) + q)
	}
	for p := len(parts) - 1; p >= 0; p-- {
		g := parts[p]
		if g.level == 0 {
			// Raw samples come in time order: step from column to column
			// rather than divide for each of up to 60 000 samples.
			i, m := s.searchRaw(g.lo), s.raw.len()
			if i == m {
				continue
			}
			first := s.raw.at(i)
			c := col(first.t)
			next := colStart(c + 1)
			lo, hi, last := first.v, first.v, first.v
			for i++; i < m; i++ {
				pt := s.raw.at(i)
				if pt.t >= g.hi {
					break
				}
				if pt.t >= next {
					merge(c, lo, hi, last)
					c = col(pt.t)
					next = colStart(c + 1)
					lo, hi = pt.v, pt.v
				}
				lo, hi, last = min(lo, pt.v), max(hi, pt.v), pt.v
			}
			if first.t < g.hi {
				merge(c, lo, hi, last)
			}
			continue
		}
		tr := &s.tiers[g.level-1]
		m := tr.buckets.len()
		j := sort.Search(m, func(j int) bool { return tr.buckets.at(j).start+tr.width > g.lo })
		for ; j < m; j++ {
			b := tr.buckets.at(j)
			if b.start >= g.hi {
				break
			}
			c0 := col(max(b.start, g.lo))
			c1 := col(min(b.start+tr.width, g.hi) - 1)
			for i := c0; i <= c1; i++ {
				merge(i, b.min, b.max, b.last)
			}
		}
	}
	return cols
}

// maxIn returns the highest value in [a, b). It is exact inside the raw
// window: whole buckets answer for the middle of the range and raw samples
// for its ends. Where only tiers remain it is the max of the finest buckets
// overlapping the range, which may include samples up to one bucket width
// outside it.
func (s *series) maxIn(a, b int64) (uint64, bool) {
	var m maxAcc
	if s.count > 0 && a < b {
		s.maxLevel(len(s.tiers), a, b, &m)
	}
	return m.v, m.ok
}

// maxAcc gathers the highest value (v) and, for extremesIn, the lowest (lo).
type maxAcc struct {
	v, lo uint64
	ok    bool
}

func (m *maxAcc) add(v uint64) { m.addRange(v, v) }

// addRange adds a bucket's min and max.
func (m *maxAcc) addRange(lo, hi uint64) {
	if !m.ok {
		m.v, m.lo, m.ok = hi, lo, true
		return
	}
	m.v, m.lo = max(m.v, hi), min(m.lo, lo)
}

// maxLevel adds the max of [a, b) at level l (0 raw, i>0 tier i-1): the
// buckets wholly inside the range count as they are, the partial ends go
// to the next finer level.
func (s *series) maxLevel(l int, a, b int64, m *maxAcc) {
	if a >= b {
		return
	}
	if l == 0 {
		for i, n := s.searchRaw(a), s.raw.len(); i < n; i++ {
			p := s.raw.at(i)
			if p.t >= b {
				break
			}
			m.add(p.v)
		}
		return
	}
	tr := &s.tiers[l-1]
	n := tr.buckets.len()
	j := sort.Search(n, func(j int) bool { return tr.buckets.at(j).start >= a })
	k := j
	for ; k < n; k++ {
		bk := tr.buckets.at(k)
		if bk.start+tr.width > b {
			break
		}
		m.addRange(bk.min, bk.max)
	}
	fs, fe := b, b
	if k > j {
		fs, fe = tr.buckets.at(j).start, tr.buckets.at(k-1).start+tr.width
	}
	s.maxEdge(l, a, fs, m)
	s.maxEdge(l, fe, b, m)
}

// maxEdge adds the max of [x, y), a part of level l's range not covered by
// whole buckets: the finer level answers where it still holds the data,
// level l's overlapping buckets where it no longer does.
func (s *series) maxEdge(l int, x, y int64, m *maxAcc) {
	if x >= y {
		return
	}
	if o := s.oldest(l - 1); x < o {
		tr := &s.tiers[l-1]
		n := tr.buckets.len()
		end := min(y, o)
		j := sort.Search(n, func(j int) bool { return tr.buckets.at(j).start+tr.width > x })
		for ; j < n && tr.buckets.at(j).start < end; j++ {
			bk := tr.buckets.at(j)
			m.addRange(bk.min, bk.max)
		}
		x = o
	}
	s.maxLevel(l-1, x, y, m)
}
