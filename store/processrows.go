// One process's rows on one device, read without copying the others: a
// forecast reads them every second.

package store

import "github.com/gputop/gputop/wire"

// ProcessRows returns up to the n newest rows of process pid on device
// dev with a time at or before t that keep accepts (nil: every one),
// oldest first. keep runs under the store's read lock: it must only look
// at the row.
func (s *Store) ProcessRows(pid, dev int, t int64, n int, keep func(*wire.Row) bool) []wire.Row {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []wire.Row
	for i := len(s.rows) - 1; i >= 0 && len(out) < n; i-- {
		r := &s.rows[i]
		if r.T > t || isHole(r) || r.PID != pid || r.Dev != dev || (keep != nil && !keep(r)) {
			continue
		}
		out = append(out, *r)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// VisitProcessRows calls visit with each row of process pid on device
// dev with a time at or before t, newest first, until visit returns false.
// visit runs under the store's read lock: it must only read the row, and
// copy what it keeps.
func (s *Store) VisitProcessRows(pid, dev int, t int64, visit func(*wire.Row) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := len(s.rows) - 1; i >= 0; i-- {
		r := &s.rows[i]
		if r.T > t || isHole(r) || r.PID != pid || r.Dev != dev {
			continue
		}
		if !visit(r) {
			return
		}
	}
}
