// The ledger on rows (what a process's memory was made of, wire.Ledger):
// a walk's answer made safe to keep, what a row's ledger needs from the
// series (NVML's figure for the process, what the allocator counters did
// since the previous row), and the newest ledger of each process for the
// exporters.

package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/gputop/gputop/wire"
)

// cleanLedger copies a ledger from outside with its text made printable
// and its list held to the wire's bounds (a recording's rows and held
// lines are not checked as a mark is). A ledger whose parts add up to
// more than its allocated bytes, or whose allocated bytes are more than
// its reserved, keeps no figures: it says why instead, so that a ledger
// shown always adds up.
func cleanLedger(l *wire.Ledger) *wire.Ledger {
	if l == nil {
		return nil
	}
	c := *l
	c.Skipped = clipText(CleanText(c.Skipped), wire.MaxSettingBytes)
	c.Uncounted = slices.Clip(slices.Clone(c.Uncounted[:min(len(c.Uncounted), wire.MaxUncounted)]))
	for i := range c.Uncounted {
		c.Uncounted[i] = clipText(CleanText(c.Uncounted[i]), wire.MaxSettingBytes)
	}
	if c.Skipped != "" {
		return &c
	}
	if why := ledgerAddsUp(c); why != "" {
		return &wire.Ledger{T: c.T, Skipped: why, TookMS: c.TookMS}
	}
	return &c
}

// ledgerAddsUp says what is wrong with a ledger's figures ("": nothing).
func ledgerAddsUp(l wire.Ledger) string {
	if l.Allocated > l.Reserved {
		return fmt.Sprintf("the ledger's allocated bytes (%d) are more than its reserved (%d)", l.Allocated, l.Reserved)
	}
	left := l.Allocated
	for _, p := range []uint64{l.Params, l.Grads, l.Optimizer, l.Activations, l.OtherTensors, l.Workspace} {
		if p > left {
			return fmt.Sprintf("the ledger's parts add up to more than its allocated bytes (%d)", l.Allocated)
		}
		left -= p
	}
	return ""
}

// ProcFigureAge is how much older than a ledger NVML's figure for the
// process may be (ProcUsedAt's within): NVML's process lists come about
// ten times a second, so a figure older than this is of a process NVML
// had stopped listing.
const ProcFigureAge = 3 * time.Second

// ProcUsedAt is NVML's figure for process pid on device dev at t: from
// the last process list at or before t that gave one, when that list is
// at most within older than t (past that, NVML no longer listed the
// process, or gave no figure for it). It returns the list's time too.
func (s *Store) ProcUsedAt(dev, pid int, t int64, within time.Duration) (uint64, int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[Key{dev, pid, ProcUsed}]
	if sr == nil {
		return 0, 0, false
	}
	v, at, ok := sr.valueAt(t)
	if !ok || t-at > int64(within) {
		return 0, 0, false
	}
	return v, at, true
}

// Span is what a series did over an interval (From, To]: its lowest and
// highest samples in it.
type Span struct {
	Min, Max uint64
	OK       bool // a sample in the interval
	// Exact: every sample of the interval is still held as it came;
	// false: older parts come from min/max buckets, which never miss a
	// sample and may take in some up to a bucket's width outside it
	Exact bool
}

// SpanOf returns what series k did over (from, to].
func (s *Store) SpanOf(k Key, from, to int64) Span {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 || to <= from {
		return Span{}
	}
	var m maxAcc
	sr.maxLevel(len(sr.tiers), from+1, to+1, &m)
	wrapped := sr.count > uint64(sr.raw.len())
	return Span{Min: m.lo, Max: m.v, OK: m.ok, Exact: !wrapped || from >= sr.oldestRaw()}
}

// OldestSample is the oldest sample a series holds as it came: its
// first ever (first true) unless more have come than its raw window
// holds.
func (s *Store) OldestSample(k Key) (t int64, v uint64, first, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 {
		return 0, 0, false, false
	}
	p := sr.raw.at(0)
	return p.t, p.v, sr.count == uint64(sr.raw.len()), true
}

// LedgerRow is the newest row of a process on a device whose ledger has
// figures.
type LedgerRow struct {
	PID, Dev int
	Row      wire.Row
}

// LatestLedgers returns, for each process and device, its newest row
// with a ledger that has figures (not one that says why it has none),
// in no particular order: what an exporter shows of the ledger.
func (s *Store) LatestLedgers() []LedgerRow {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[[2]int]bool{}
	var out []LedgerRow
	for i := len(s.rows) - 1; i >= 0; i-- {
		r := &s.rows[i]
		if isHole(r) || r.PID <= 0 || r.Ledger == nil || r.Ledger.Skipped != "" {
			continue
		}
		k := [2]int{r.PID, r.Dev}
		if !seen[k] {
			seen[k] = true
			out = append(out, LedgerRow{PID: r.PID, Dev: r.Dev, Row: *r})
		}
	}
	return out
}
