package summary

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// ledgerRun is a store with one training process (pid 9 on GPU 0) whose
// allocator counters come at 100 Hz and NVML's process list at 10 Hz,
// and at: the time s seconds into it.
func ledgerRun(t *testing.T) (*store.Store, func(s float64) int64) {
	t.Helper()
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", Total: 140 * gib, Source: "nvml"})
	const t0 = int64(1e18)
	at := func(s float64) int64 { return t0 + int64(s*float64(time.Second)) }
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 9, T: at(0), Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	return st, at
}

// counters plays the process's allocator from s0 to s1 seconds at 100 Hz
// (allocated of each moment; torch's peak counter follows it unless
// resetAt is in range, where it drops to the allocated bytes then) with
// reserved fixed, and NVML's process list at 10 Hz counting ctx beyond it.
func counters(st *store.Store, at func(float64) int64, s0, s1 float64, alloc func(s float64) uint64, reserved, ctx uint64, peak *uint64, resetAt float64) {
	for i := int(math.Round(s0 * 100)); i <= int(math.Round(s1*100)); i++ {
		s := float64(i) / 100
		a := alloc(s)
		if resetAt > 0 && i == int(resetAt*100) {
			*peak = a
		}
		*peak = max(*peak, a)
		st.AgentSample(9, wire.Sample{Type: wire.TypeSample, T: at(s), Dev: 0, Allocated: a, Reserved: reserved, Peak: *peak})
		if i%10 == 0 {
			st.SetProcs(0, at(s), []wire.Proc{{PID: 9, Name: "python3", Used: reserved + ctx}})
		}
	}
}

// mark is a mark of pid 9 at s with the counters then and ledger l (nil:
// none), its allocated and reserved those of the counters.
func mark(st *store.Store, at func(float64) int64, s float64, label string, alloc, reserved, peak uint64, l *wire.Ledger) {
	ds := wire.DevStats{Dev: 0, Allocated: alloc, Reserved: reserved, Peak: peak}
	if l != nil {
		c := *l
		c.T, c.Allocated, c.Reserved = at(s), alloc, reserved
		ds.Ledger = &c
	}
	st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: at(s), Label: label, Devs: []wire.DevStats{ds}})
}

// stepLedger is a training step's ledger: 1 GiB of parameters, 2 GiB of
// Adam's state, 100 MiB of other tensors, a 32 MiB workspace; the rest of
// allocated unattributed.
var stepLedger = wire.Ledger{Params: 1 * gib, Optimizer: 2 * gib, OtherTensors: 100 * mib, Workspace: 32 * mib}

func stepPersistent() uint64 { return 1*gib + 2*gib + 100*mib + 32*mib }

// The ledger's nine parts add up, exactly, to NVML's figure for the
// process at the walk; each says what it is based on.
func TestLedgerAddsUpToNVMLsFigure(t *testing.T) {
	st, at := ledgerRun(t)
	var peak uint64
	base := stepPersistent() + 5*mib + 12345 // 5 MiB and a few bytes no part claims
	const reserved, ctx = 4*gib + 700*mib + 4096, 517*mib + 33
	counters(st, at, 0, 2, func(float64) uint64 { return base }, reserved, ctx, &peak, 0)
	mark(st, at, 2, "step 1", base, reserved, peak, &stepLedger)
	rows := RowsOf(st, st.Rows(), st.Devices())
	l, ok := LedgerOf(rows[0])
	if !ok {
		t.Fatalf("no ledger on %+v", rows[0].Row)
	}
	if l.NVML == nil || *l.NVML != reserved+ctx || l.NVMLAt != at(2) {
		t.Fatalf("NVML's figure for the process: %v at %d, want %d at %d", l.NVML, l.NVMLAt, reserved+ctx, at(2))
	}
	var sum uint64
	names := []string{}
	for _, p := range l.Parts {
		if !p.Known || p.Basis == "" {
			t.Fatalf("part %+v: unknown, or no basis", p)
		}
		sum += p.Bytes
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "params,grads,optimizer,activations,other_tensors,workspace,unattributed,cached_free,outside_torch" {
		t.Fatalf("parts %s", got)
	}
	if sum != reserved+ctx {
		t.Fatalf("the parts add up to %d, NVML's figure for the process is %d", sum, reserved+ctx)
	}
	if total, whole := l.Total(); !whole || total != reserved+ctx {
		t.Fatalf("total %d (whole %v)", total, whole)
	}
	for name, want := range map[string]uint64{wire.PartUnattributed: 5*mib + 12345, wire.PartCachedFree: reserved - base, wire.PartOutsideTorch: ctx} {
		if got := l.Part(name).Bytes; got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	// the CSV's nine columns are the same figures, and add up the same
	recs := StoreRecords(st)
	col := map[string]int{}
	for i, n := range recs[0] {
		col[n] = i
	}
	var csvSum uint64
	for _, n := range PartNames() {
		i, ok := col[n+"_bytes"]
		if !ok {
			t.Fatalf("no column %s_bytes in %v", n, recs[0])
		}
		var v uint64
		for _, c := range recs[1][i] {
			v = 10*v + uint64(c-'0')
		}
		csvSum += v
	}
	if csvSum != reserved+ctx {
		t.Fatalf("the CSV's ledger columns add up to %d, want %d: %v", csvSum, reserved+ctx, recs[1])
	}
}

// Where NVML gave no figure for the process at the walk (no process list
// within store.ProcFigureAge, or one below torch's reserved bytes), outside
// torch is unknown: said so, an empty CSV cell, never 0; the other parts
// still add up to torch's reserved bytes.
func TestLedgerOutsideTorchUnknown(t *testing.T) {
	st, at := ledgerRun(t)
	base := stepPersistent()
	// no process list at all
	mark(st, at, 1, "no NVML", base, 5*gib, base, &stepLedger)
	// a process list 4 s before the walk: too old
	st.SetProcs(0, at(2), []wire.Proc{{PID: 9, Used: 6 * gib}})
	mark(st, at, 6, "stale", base, 5*gib, base, &stepLedger)
	// NVML behind the allocator: below torch's reserved
	st.SetProcs(0, at(7), []wire.Proc{{PID: 9, Used: 4 * gib}})
	mark(st, at, 7.01, "lagging", base, 5*gib, base, &stepLedger)
	rows := RowsOf(st, st.Rows(), st.Devices())
	recs := StoreRecords(st)
	col := map[string]int{}
	for i, n := range recs[0] {
		col[n] = i
	}
	for i, r := range rows {
		l, ok := LedgerOf(r)
		if !ok {
			t.Fatalf("%s: no ledger", r.Label)
		}
		out := l.Part(wire.PartOutsideTorch)
		if out.Known || out.Bytes != 0 || out.Why == "" {
			t.Errorf("%s: outside torch %+v, want unknown with a reason", r.Label, out)
		}
		if r.Label == "lagging" && !strings.Contains(out.Why, "below torch's reserved") {
			t.Errorf("lagging: %q", out.Why)
		}
		if c := recs[i+1][col["outside_torch_bytes"]]; c != "" {
			t.Errorf("%s: outside_torch_bytes %q, want an empty cell", r.Label, c)
		}
		if c := recs[i+1][col["params_bytes"]]; c != "1073741824" {
			t.Errorf("%s: params_bytes %q", r.Label, c)
		}
		var sum uint64
		for _, p := range l.Parts {
			sum += p.Bytes
		}
		if total, whole := l.Total(); whole || total != 5*gib || sum != 5*gib {
			t.Errorf("%s: total %d (whole %v), parts %d: want torch's reserved", r.Label, total, whole, sum)
		}
	}
}

// A row without a ledger, and one whose walk was skipped, have empty
// ledger cells; the skipped one says why.
func TestLedgerAbsentOrSkipped(t *testing.T) {
	st, at := ledgerRun(t)
	mark(st, at, 1, "none", 10, 20, 10, nil)
	mark(st, at, 2, "skipped", 10, 20, 10, &wire.Ledger{Skipped: "the walk would take 900 ms, over its 200 ms bound"})
	rows := RowsOf(st, st.Rows(), st.Devices())
	if _, ok := LedgerOf(rows[0]); ok || LedgerNote(rows[0]) != "" {
		t.Errorf("a row without a ledger: %q", LedgerNote(rows[0]))
	}
	if _, ok := LedgerOf(rows[1]); ok || LedgerNote(rows[1]) != "no ledger: the walk would take 900 ms, over its 200 ms bound" {
		t.Errorf("a skipped walk: %q", LedgerNote(rows[1]))
	}
	for _, rec := range StoreRecords(st)[1:] {
		if tail := strings.Join(rec[len(rec)-9:], ","); tail != ",,,,,,,," {
			t.Errorf("ledger cells %q, want empty", tail)
		}
	}
}

// The peak between two rows: exact where torch's peak counter rose in the
// interval (its value at the row), a bound where it did not (at least the
// highest sample, at most the counter), no upper bound where the program
// reset the counter; broken down into the persistent parts of the
// interval's first row's ledger and the rest.
func TestIntervalPeakExactOrBound(t *testing.T) {
	st, at := ledgerRun(t)
	var peak uint64
	base := stepPersistent()
	const reserved, ctx = 8 * gib, 500 * mib
	// 0-2 s: the persistent parts alone
	counters(st, at, 0, 2, func(float64) uint64 { return base }, reserved, ctx, &peak, 0)
	mark(st, at, 2, "step 1", base, reserved, peak, &stepLedger)
	// 2-4 s: a forward and backward whose activations reach 2.5 GiB at 3 s
	counters(st, at, 2.01, 4, func(s float64) uint64 {
		if s == 3 {
			return base + 5*gib/2
		}
		return base + gib
	}, reserved, ctx, &peak, 0)
	mark(st, at, 4, "step 2", base, reserved, peak, &stepLedger)
	// 4-6 s: a smaller step (2 GiB): torch's counter stays where it was
	counters(st, at, 4.01, 6, func(s float64) uint64 {
		if s == 5 {
			return base + 2*gib
		}
		return base
	}, reserved, ctx, &peak, 0)
	mark(st, at, 6, "step 3", base, reserved, peak, nil)
	// 6-8 s: the program resets the counter at 7 s
	counters(st, at, 6.01, 8, func(s float64) uint64 {
		if s == 6.5 {
			return base + gib
		}
		return base
	}, reserved, ctx, &peak, 7)
	mark(st, at, 8, "step 4", base, reserved, peak, nil)
	// 8-10 s: 3 GiB more at 8.5 s, the counter reset at 9 s, 0.5 GiB more at
	// 9.5 s: the counter ends above where it started, below its own 8.5 s
	counters(st, at, 8.01, 10, func(s float64) uint64 {
		switch s {
		case 8.5:
			return base + 3*gib
		case 9.5:
			return base + gib/2
		}
		return base
	}, reserved, ctx, &peak, 9)
	mark(st, at, 10, "step 5", base, reserved, peak, nil)

	rows := RowsOf(st, st.Rows(), st.Devices())
	byLabel := map[string]*IntervalPeak{}
	for _, r := range rows {
		byLabel[r.Label] = r.IntervalPeak
	}
	// the first row: since the process's first sample, flat: the counter
	// did not rise, and allocated reached it
	if k := byLabel["step 1"]; k == nil || k.FromLabel != "" || !k.Exact || !k.Reached || k.Bytes != base || k.AtMost != nil {
		t.Fatalf("step 1: %+v", k)
	}

	k := byLabel["step 2"]
	if k == nil || !k.Exact || k.Bytes != base+5*gib/2 || k.FromLabel != "step 1" || k.From != at(2) || k.Reset || k.Coarse {
		t.Fatalf("step 2: %+v", k)
	}
	if p := k.Persistent; p == nil || p.Label != "step 1" || !p.Start || p.Sum() != base {
		t.Fatalf("step 2's persistent parts: %+v", k.Persistent)
	}
	if lo, hi, ok := k.Rest(); !ok || lo != 5*gib/2 || hi == nil || *hi != lo {
		t.Fatalf("step 2's activations and temporaries: %d..%v %v", lo, hi, ok)
	}

	k = byLabel["step 3"]
	if k == nil || k.Exact || k.Bytes != base+2*gib || k.AtMost == nil || *k.AtMost != base+5*gib/2 || k.Reset {
		t.Fatalf("step 3: %+v", k)
	}
	if lo, hi, ok := k.Rest(); !ok || lo != 2*gib || hi == nil || *hi != 5*gib/2 || k.Persistent.Label != "step 2" {
		t.Fatalf("step 3's rest: %d..%v %v from %+v", lo, hi, ok, k.Persistent)
	}

	k = byLabel["step 4"]
	if k == nil || k.Exact || !k.Reset || k.AtMost != nil || k.Bytes != base+gib {
		t.Fatalf("step 4: %+v", k)
	}
	if _, hi, ok := k.Rest(); ok || hi != nil {
		t.Fatal("step 4 has no ledger at either end: no composition")
	}
	// reset and risen again: not the counter's figure at the row (0.5 GiB
	// above base), at least what it read before the reset
	if k = byLabel["step 5"]; k == nil || k.Exact || !k.Reset || k.AtMost != nil || k.Bytes != base+3*gib {
		t.Fatalf("step 5: %+v", k)
	}
	// without the store (Rows), no interval peaks
	for _, r := range Rows(st.Rows(), st.Devices()) {
		if r.IntervalPeak != nil || r.NVMLProcess != nil {
			t.Fatalf("Rows worked out what only the store's series tell: %+v", r)
		}
	}
}

// SeriesReads gives what RowsOf gives, reading the series again only for
// the rows whose interval changed: a ledger that came to a row after it
// (a walk's late answer) reaches it, the rows before it are kept.
func TestSeriesReadsKeepsWhatDidNotChange(t *testing.T) {
	st, at := ledgerRun(t)
	var peak uint64
	base := stepPersistent()
	counters(st, at, 0, 2, func(float64) uint64 { return base }, 8*gib, 500*mib, &peak, 0)
	mark(st, at, 2, "step 1", base, 8*gib, peak, nil)
	counters(st, at, 2.01, 4, func(s float64) uint64 {
		if s == 3 {
			return base + gib
		}
		return base
	}, 8*gib, 500*mib, &peak, 0)
	mark(st, at, 4, "step 2", base, 8*gib, peak, nil)
	var reads SeriesReads
	first := reads.RowsOf(st, st.Rows(), st.Devices())
	if k := first[1].IntervalPeak; k == nil || !k.Exact || k.Persistent != nil {
		t.Fatalf("step 2 before any ledger: %+v", k)
	}
	// a walk's late answer gives step 1 its ledger
	st.AddRow(wire.Row{T: at(4.5), Label: "look", Dev: 0, PID: 9, Source: "key", Allocated: &base, Reserved: &base, Peak: &peak, Awaiting: true})
	l := stepLedger
	l.T, l.Allocated, l.Reserved = at(4.6), base, 8*gib
	st.SetHeld(9, 0, at(4.5), &wire.Held{T: at(4.6)}, &l, nil)
	again := reads.RowsOf(st, st.Rows(), st.Devices())
	fresh := RowsOf(st, st.Rows(), st.Devices())
	for i := range fresh {
		if !reflect.DeepEqual(again[i].IntervalPeak, fresh[i].IntervalPeak) || !reflect.DeepEqual(again[i].NVMLProcess, fresh[i].NVMLProcess) {
			t.Fatalf("row %s: kept %+v, fresh %+v", fresh[i].Label, again[i].IntervalPeak, fresh[i].IntervalPeak)
		}
	}
	if again[2].NVMLProcess == nil || *again[2].NVMLProcess != 8*gib+500*mib {
		t.Fatalf("look's NVML figure: %v", again[2].NVMLProcess)
	}
	if first[1].IntervalPeak != again[1].IntervalPeak {
		t.Fatal("step 2's interval did not change, yet its series were read again")
	}
}
