// The series: samples in (NVML's at 1 kHz, the agents'), values, columns
// and extremes out.

package store

import (
	"sort"
)

// AddNVML adds one NVML device sample. This is the 1 kHz hot path.
func (s *Store) AddNVML(dev int, t int64, used, reserved uint64) {
	s.mu.Lock()
	if dev >= 0 && dev < MaxDevices {
		if dev >= len(s.nvml) {
			s.nvml = append(s.nvml, make([]*[2]*series, dev+1-len(s.nvml))...)
		}
		p := s.nvml[dev]
		if p == nil {
			p = &[2]*series{s.get(Key{dev, 0, NVMLUsed}), s.get(Key{dev, 0, NVMLReserved})}
			s.nvml[dev] = p
		}
		p[0].add(t, used)
		p[1].add(t, reserved)
	} else {
		s.add(Key{dev, 0, NVMLUsed}, t, used)
		s.add(Key{dev, 0, NVMLReserved}, t, reserved)
	}
	if len(s.nvmlDue) > 0 {
		s.fillDue(dev, t)
	}
	s.touch(t)
	s.mu.Unlock()
}

func (s *Store) add(k Key, t int64, v uint64) { s.get(k).add(t, v) }

// get returns the series of k, creating it.
func (s *Store) get(k Key) *series {
	sr := s.series[k]
	if sr == nil {
		sr = newSeries(s.opt)
		s.series[k] = sr
	}
	return sr
}

// Latest returns the newest sample of a series.
func (s *Store) Latest(k Key) (v uint64, t int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 {
		return 0, 0, false
	}
	return sr.last.v, sr.last.t, true
}

// End is the time of the newest sample in any series, or of the newest
// row or marker when one is newer (a process's last rows often
// come after its last sample: a replay must reach them).
func (s *Store) End() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var end int64
	for _, sr := range s.series {
		if sr.count > 0 && sr.last.t > end {
			end = sr.last.t
		}
	}
	return max(end, s.lastMarker)
}

// ValueAt returns a series' last value at or before t; false before its
// first sample. It is exact inside the raw window. Older than that it is the
// last value of the finest bucket containing t, which may have been sampled
// up to one bucket width after t.
func (s *Store) ValueAt(k Key, t int64) (uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return 0, false
	}
	v, _, ok := sr.valueAt(t)
	return v, ok
}

// Columns aggregates a series over [from, to) into n chart columns, each
// with the min, max and last value of the samples it covers.
// See Column for what a column's values mean once tiers answer.
func (s *Store) Columns(k Key, from, to int64, n int) []Column {
	if n <= 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return make([]Column, n)
	}
	return sr.columns(from, to, n)
}

// Max returns the highest value of a series in [from, to). It is exact while
// the range is inside the raw window; older parts are answered by the
// finest buckets overlapping them, which may add up to one bucket width on
// either side.
func (s *Store) Max(k Key, from, to int64) (uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return 0, false
	}
	return sr.maxIn(from, to)
}

// Count returns how many samples a series has received in all.
func (s *Store) Count(k Key) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sr := s.series[k]; sr != nil {
		return sr.count
	}
	return 0
}

// Keys lists the series held.
func (s *Store) Keys() []Key {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ks := make([]Key, 0, len(s.series))
	for k := range s.series {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.Dev != b.Dev {
			return a.Dev < b.Dev
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.Metric < b.Metric
	})
	return ks
}
