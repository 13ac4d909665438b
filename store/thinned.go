package store

import "sort"

// thinned is a process-device's history of readings kept in bounded
// memory over a long run: its newest readings, and before those the first
// reading of each minute, for a while. Layout and framework readings both
// keep one.
type thinned[T any] struct {
	recent  ring[T] // the newest readings
	minutes ring[T] // before those, the first of each minute
	time    func(T) int64
}

func newThinned[T any](recent, minutes int, time func(T) int64) thinned[T] {
	return thinned[T]{recent: newRing[T](recent), minutes: newRing[T](minutes), time: time}
}

// push adds v, its time not before the newest's, and reports whether a
// reading is no longer kept: the one leaving the recent ring when its
// minute already has one, else the oldest minute's when full.
func (h *thinned[T]) push(v T) (dropped bool) {
	if h.recent.len() == h.recent.limit {
		old := h.recent.at(0)
		m := floorDiv(h.time(old), layoutMinute)
		if n := h.minutes.len(); n > 0 && floorDiv(h.time(h.minutes.at(n-1)), layoutMinute) == m {
			dropped = true
		} else {
			if h.minutes.len() == h.minutes.limit {
				dropped = true
			}
			h.minutes.push(old)
		}
	}
	h.recent.push(v)
	return dropped
}

// newest is the newest reading, if any.
func (h *thinned[T]) newest() (T, bool) {
	if n := h.recent.len(); n > 0 {
		return h.recent.at(n - 1), true
	}
	var zero T
	return zero, false
}

// at is the newest reading at or before t, if any.
func (h *thinned[T]) at(t int64) (T, bool) {
	for _, r := range []*ring[T]{&h.recent, &h.minutes} {
		if i := sort.Search(r.len(), func(i int) bool { return h.time(r.at(i)) > t }); i > 0 {
			return r.at(i - 1), true
		}
	}
	var zero T
	return zero, false
}
