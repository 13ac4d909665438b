// What a series did over a trailing window, for an exporter that is asked
// now and then (a Prometheus scrape, perhaps by several servers) and must
// not miss a spike in between.

package store

import (
	"math"
	"slices"

	"github.com/gputop/gputop/wire"
)

// Extremes is a series' lowest and highest sample over a window, and its
// newest sample.
type Extremes struct {
	Min, Max uint64
	Last     uint64
	OK       bool // false: the series has no sample at all
}

// ExtremesFrom returns the min and max of k's samples at or after t,
// counting the value the series held at t (its last sample before t), and
// its newest sample. With no sample since t they are the newest sample's
// value: what the series held all along. It reads and changes nothing
// but the series, so any number of callers asking with the same t get the
// same answer. Exact inside the raw window (30 s by default); older parts
// come from min/max buckets, which never miss a sample and may include
// some up to a bucket's width before t. One read lock and no copy of the
// series.
func (s *Store) ExtremesFrom(k Key, t int64) Extremes {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 {
		return Extremes{}
	}
	e := Extremes{Min: sr.last.v, Max: sr.last.v, Last: sr.last.v, OK: true}
	var m maxAcc
	if held, _, ok := sr.valueAt(t); ok {
		m.add(held)
	}
	sr.maxLevel(len(sr.tiers), max(t, sr.first), math.MaxInt64, &m)
	if m.ok {
		e.Min, e.Max = min(m.lo, e.Last), max(m.v, e.Last)
	}
	return e
}

// LastRows returns up to the n newest rows, oldest first,
// without copying the rest (a scrape asks at every interval).
func (s *Store) LastRows(n int) []wire.Row {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var rows []wire.Row
	for i := len(s.rows) - 1; i >= 0 && len(rows) < n; i-- {
		if r := s.rows[i]; !isHole(&r) {
			rows = append(rows, r)
		}
	}
	slices.Reverse(rows)
	return rows
}
