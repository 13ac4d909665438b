// The peak between two rows, broken down: the highest allocated point
// since the previous row of a process on a device, whether torch's own
// peak counter pins it down, and what it was made of.

package summary

import (
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// IntervalPeak is the highest allocated point of the interval before a
// row: since the previous row of its process on its device (From, the
// row's time], or, for a process's first row, since its oldest sample
// held. torch's peak counter (allocated_bytes.all.peak) is read at both
// ends and never reset by gputop: when it rose in the interval, its value
// at the row is the interval's peak (Exact); when it did not, the peak is
// at most the counter (AtMost) and at least the highest 100 Hz sample of
// allocated seen in the interval. When the program reset the counter in
// the interval (Reset), the peak is at least the highest of the samples
// of allocated and of the counter's values above where it started.
type IntervalPeak struct {
	From      int64
	FromLabel string // the previous row's label ("": the interval starts at the process's oldest sample held)
	Exact     bool
	// Exact because the counter did not rise and the highest allocated
	// seen in the interval is the counter's value
	Reached bool
	// Exact: the interval's peak; else the highest allocated seen in it
	// (the row's own counter or a sample), which the peak is at least
	Bytes uint64
	// not Exact: torch's peak counter at the row, which the interval's
	// peak cannot pass; nil when the counter went down in the interval
	// (Reset): no bound from it then
	AtMost *uint64
	Reset  bool // the peak counter went down: reset_peak_memory_stats in the program
	// Coarse: the samples were read from min/max buckets (the interval is
	// older than the raw window), which may take in samples up to a
	// bucket's width outside it
	Coarse bool
	// the persistent parts from a ledger (nil: no ledger at either end)
	Persistent *Persistent
}

// Persistent is what a ledger counted that outlives a training step:
// parameters, gradients, optimizer state, other tensors and workspaces.
// At the peak, everything above them is activations and temporaries.
type Persistent struct {
	Label                                             string // the row whose ledger they are from
	T                                                 int64
	Start                                             bool // the ledger is the interval's first row's (else its last's)
	Params, Grads, Optimizer, OtherTensors, Workspace uint64
}

// Sum is the persistent parts together.
func (p Persistent) Sum() uint64 {
	return p.Params + p.Grads + p.Optimizer + p.OtherTensors + p.Workspace
}

func persistentOf(r wire.Row, start bool) *Persistent {
	l := r.Ledger
	if l == nil || l.Skipped != "" {
		return nil
	}
	return &Persistent{Label: r.Label, T: r.T, Start: start, Params: l.Params, Grads: l.Grads,
		Optimizer: l.Optimizer, OtherTensors: l.OtherTensors, Workspace: l.Workspace}
}

// Rest is the peak above the persistent parts: activations and
// temporaries (and whatever else was allocated since the ledger was
// taken). Exact: one figure (hi == lo); a bound: at least lo, at most
// *hi (nil: no upper bound). ok is false without persistent parts.
func (k IntervalPeak) Rest() (lo uint64, hi *uint64, ok bool) {
	if k.Persistent == nil {
		return 0, nil, false
	}
	sub := func(v uint64) uint64 { return v - min(v, k.Persistent.Sum()) }
	lo = sub(k.Bytes)
	if k.Exact {
		return lo, &lo, true
	}
	if k.AtMost != nil {
		h := sub(*k.AtMost)
		return lo, &h, true
	}
	return lo, nil, true
}

// Top is the most the interval's peak may be: the peak when exact, else
// its upper bound (nil: none).
func (k IntervalPeak) Top() *uint64 {
	if k.Exact {
		return &k.Bytes
	}
	return k.AtMost
}

// intervalPeak works out row r's interval peak from the previous row of
// its process on its device (prev, when has) and the store's series.
func intervalPeak(st *store.Store, r wire.Row, prev wire.Row, has bool) *IntervalPeak {
	if r.PID <= 0 || r.Allocated == nil || r.Peak == nil {
		return nil
	}
	ka := store.Key{Dev: r.Dev, PID: r.PID, Metric: store.Allocated}
	kp := store.Key{Dev: r.Dev, PID: r.PID, Metric: store.Peak}
	k := &IntervalPeak{}
	var startPeak uint64
	switch {
	case has && prev.Peak == nil:
		return nil // no counter at the interval's start
	case has:
		k.From, k.FromLabel, startPeak = prev.T, prev.Label, *prev.Peak
	default:
		t0, _, _, ok := st.OldestSample(ka)
		_, pk, _, pok := st.OldestSample(kp)
		if !ok || !pok || t0 > r.T {
			return nil
		}
		// the oldest sample is in the interval: it starts just before it
		k.From, startPeak = t0-1, pk
	}
	alloc := st.SpanOf(ka, k.From, r.T)
	peaks := st.SpanOf(kp, k.From, r.T)
	k.Coarse = (alloc.OK && !alloc.Exact) || (peaks.OK && !peaks.Exact)
	// the counter only rises between resets: one that went below where it
	// started, or below a value it had in the interval, was reset (torch's
	// reset_peak_memory_stats, in the program: train_mlp.py's cleanup does)
	k.Reset = *r.Peak < startPeak || (peaks.OK && (peaks.Min < startPeak || peaks.Max > *r.Peak))
	k.Bytes = *r.Allocated
	if alloc.OK {
		k.Bytes = max(k.Bytes, alloc.Max)
	}
	if k.Reset && peaks.OK && peaks.Max > startPeak {
		k.Bytes = max(k.Bytes, peaks.Max) // a peak the counter read in the interval, before a reset
	}
	switch {
	case !k.Reset && *r.Peak > startPeak:
		k.Exact, k.Bytes = true, *r.Peak
	case !k.Reset:
		pk := *r.Peak
		k.Bytes = min(k.Bytes, pk) // a bucket's sample from outside the interval
		if k.Bytes == pk && !k.Coarse {
			// the counter did not rise, and a sample reached it: the peak
			k.Exact, k.Reached = true, true
		} else {
			k.AtMost = &pk
		}
	}
	k.Persistent = persistentOf(prev, true)
	if !has || k.Persistent == nil {
		k.Persistent = persistentOf(r, false)
	}
	return k
}

// RowsOf is Rows with what the store's series add to each row: NVML's
// figure for the process at its ledger's walk (the ledger's outside
// torch), and the peak of the interval before it (IntervalPeak).
func RowsOf(st *store.Store, snaps []wire.Row, devs []store.Device) []Row {
	return (&SeriesReads{}).RowsOf(st, snaps, devs)
}

// SeriesReads keeps what RowsOf read of the store's series for each row
// from one call to the next, so that rows worked out again (a new row, a
// row renamed) read the series only for the rows that are new or whose
// interval changed (its previous row, a ledger at either end). The zero
// value is ready; it keeps only the last call's reads.
type SeriesReads struct {
	st *store.Store // whose rows the reads are of
	m  map[readsKey]seriesRead
}

// readsKey names a row's interval: the row and its previous row of the
// process on the device (their ids; 0: none), and when their ledgers were
// taken (0: none), which a late walk's answer changes.
type readsKey struct {
	id, prev   uint64
	ledger, pl int64
}

type seriesRead struct {
	nvml *uint64
	at   int64
	peak *IntervalPeak
}

func ledgerT(r wire.Row) int64 {
	if r.Ledger == nil {
		return 0
	}
	return r.Ledger.T + 1 // a ledger at 0 is still one
}

// RowsOf is the package's RowsOf, reusing the reads of the previous call.
func (c *SeriesReads) RowsOf(st *store.Store, snaps []wire.Row, devs []store.Device) []Row {
	rows := Rows(snaps, devs)
	if c.st != st {
		c.st, c.m = st, nil
	}
	prev := map[rowKey]wire.Row{}
	next := make(map[readsKey]seriesRead, len(c.m))
	for i := range rows {
		r := &rows[i]
		k := rowKey{r.Dev, r.PID}
		p, has := prev[k]
		key := readsKey{id: r.ID, prev: p.ID, ledger: ledgerT(r.Row), pl: ledgerT(p)}
		got, ok := c.m[key]
		if !ok || r.ID == 0 {
			got = readSeries(st, r.Row, p, has)
		}
		if r.ID != 0 {
			next[key] = got
		}
		r.NVMLProcess, r.NVMLProcessAt, r.IntervalPeak = got.nvml, got.at, got.peak
		if r.Allocated != nil {
			prev[k] = r.Row
		}
	}
	c.m = next
	return rows
}

// readSeries reads what row r needs of the series (prev: the previous row
// of its process on its device, when has).
func readSeries(st *store.Store, r, prev wire.Row, has bool) seriesRead {
	var got seriesRead
	if l := r.Ledger; r.PID > 0 && l != nil && l.Skipped == "" {
		t := l.T
		if t == 0 {
			t = r.T
		}
		if v, at, ok := st.ProcUsedAt(r.Dev, r.PID, t, store.ProcFigureAge); ok {
			got.nvml, got.at = &v, at
		}
	}
	got.peak = intervalPeak(st, r, prev, has)
	return got
}
