// What a series did since a moment, for an exporter that is asked now and
// then (a Prometheus scrape) and must not miss a spike in between.

package store

import (
	"math"

	"github.com/gputop/gputop/wire"
)

// Extremes is a series' lowest and highest sample since a time, and its
// newest sample.
type Extremes struct {
	Min, Max uint64
	Last     uint64
	LastT    int64 // the newest sample's time: pass it to the next call
	OK       bool  // false: the series has no sample at all
}

// ExtremesSince returns the min and max of k's samples at or after t, and
// its newest sample. With no sample since t they are the newest sample's
// value: what the series held all along. Samples of a series only move
// forward in time (series.add), so a caller that passes the LastT it got
// before sees every sample that came since, even one that reached the
// store late in a batch; the sample at LastT counts again, as the value
// held when the interval began. Exact inside the raw window (30 s by
// default); older parts come from min/max buckets, so nothing is missed
// there either. One read lock and no copy of the series.
func (s *Store) ExtremesSince(k Key, t int64) Extremes {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 {
		return Extremes{}
	}
	e := Extremes{Min: sr.last.v, Max: sr.last.v, Last: sr.last.v, LastT: sr.last.t, OK: true}
	var m maxAcc
	sr.maxLevel(len(sr.tiers), max(t, sr.first), math.MaxInt64, &m)
	if m.ok {
		e.Min, e.Max = m.lo, m.v
	}
	return e
}

// LastSnapshots returns up to the n newest snapshot rows, oldest first,
// without copying the rest (a scrape asks at every interval).
func (s *Store) LastSnapshots(n int) []wire.Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n = max(min(n, len(s.snapshots)), 0)
	return append([]wire.Snapshot(nil), s.snapshots[len(s.snapshots)-n:]...)
}
