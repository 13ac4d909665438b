// The chart's markers, in time order: every row is one (its
// label, its kind), and the markers that are no row's (an agent that
// ended) are kept apart.

package store

import (
	"slices"
	"sort"

	"github.com/gputop/gputop/wire"
)

// Marker is a vertical line on the chart.
type Marker struct {
	T     int64
	Dev   int
	PID   int
	Label string
	Kind  string // snapshot, phase_start, phase_end, oom, ended
	Row   uint64 // the ID of the row it is; 0: no row's (ended)
}

// rowMarker is the marker a row is.
func rowMarker(r *wire.Row) Marker {
	kind := r.Kind
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	return Marker{T: r.T, Dev: r.Dev, PID: r.PID, Label: r.Label, Kind: kind, Row: r.ID}
}

// addMarker keeps the markers that are no row's in time order (a marker
// of the same time goes after those already there), so a replay counts
// those before its cursor without a scan.
func (s *Store) addMarker(m Marker) {
	i := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > m.T })
	s.markers = slices.Insert(s.markers, i, m)
	s.lastMarker = max(s.lastMarker, m.T)
}

// CountMarkers is how many markers have a time at or before t.
func (s *Store) CountMarkers(t int64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.countRows(t) + sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > t })
}

// MarkersIn returns the markers of device dev in [from, to), in time order
// (a row's before another marker of the same time).
func (s *Store) MarkersIn(dev int, from, to int64) []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.markersIn(func(m *Marker) bool { return m.Dev == dev }, from, to)
}

// Markers returns all chart markers, in time order.
func (s *Store) Markers() []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.markersIn(func(*Marker) bool { return true }, minTime, maxTime)
}

const (
	minTime = -1 << 63
	maxTime = 1<<63 - 1
)

// markersIn merges the rows' markers and the others in [from, to) that
// keep says to; the caller holds the lock.
func (s *Store) markersIn(keep func(*Marker) bool, from, to int64) []Marker {
	var out []Marker
	i := sort.Search(len(s.rows), func(i int) bool { return s.rows[i].T >= from })
	j := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T >= from })
	for {
		for i < len(s.rows) && isHole(&s.rows[i]) {
			i++
		}
		row := i < len(s.rows) && s.rows[i].T < to
		other := j < len(s.markers) && s.markers[j].T < to
		var m Marker
		switch {
		case row && (!other || s.rows[i].T <= s.markers[j].T):
			m = rowMarker(&s.rows[i])
			i++
		case other:
			m = s.markers[j]
			j++
		default:
			return out
		}
		if keep(&m) {
			out = append(out, m)
		}
	}
}
