// The chart's markers, kept in time order.

package store

import (
	"slices"
	"sort"
)

// Marker is a vertical line on the chart.
type Marker struct {
	T     int64
	Dev   int
	PID   int
	Label string
	Kind  string // snapshot, phase_start, phase_end, oom, ended
}

// addMarker keeps the markers in time order (a marker of the same time
// goes after those already there), so a replay counts those before its
// cursor without a scan.
func (s *Store) addMarker(m Marker) {
	i := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > m.T })
	s.markers = slices.Insert(s.markers, i, m)
	s.lastMarker = max(s.lastMarker, m.T)
}

// CountMarkers is how many markers have a time at or before t.
func (s *Store) CountMarkers(t int64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > t })
}

// MarkersIn returns the markers of device dev in [from, to), in time order.
func (s *Store) MarkersIn(dev int, from, to int64) []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T >= from })
	var out []Marker
	for ; i < len(s.markers) && s.markers[i].T < to; i++ {
		if s.markers[i].Dev == dev {
			out = append(out, s.markers[i])
		}
	}
	return out
}

// Markers returns all chart markers, in time order.
func (s *Store) Markers() []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Marker(nil), s.markers...)
}
