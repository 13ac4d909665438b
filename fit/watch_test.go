package fit

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// trainer feeds a Watch what a training loop's agent sends: samples at
// 100 Hz, each step a rise of act bytes over base held for half the step.
type trainer struct {
	w    *Watch
	t    time.Time
	peak uint64
}

func newTrainer(rule Rule) *trainer {
	tr := &trainer{w: NewWatch(rule), t: time.Unix(1_000_000, 0)}
	tr.w.Frame(wire.Hello{Type: wire.TypeHello, PID: 7})
	return tr
}

func (tr *trainer) sample(alloc uint64) {
	tr.peak = max(tr.peak, alloc)
	tr.w.Frame(wire.Sample{Type: wire.TypeSample, PID: 7, T: tr.t.UnixNano(), Allocated: alloc, Peak: tr.peak, ReservedPeak: tr.peak + mib})
	tr.t = tr.t.Add(10 * time.Millisecond)
}

// steps runs n steps of 100 ms: 5 samples at base, 5 at base + act.
func (tr *trainer) steps(n int, base, act uint64) {
	for range n {
		for range 5 {
			tr.sample(base)
		}
		for range 5 {
			tr.sample(base + act)
		}
	}
}

func TestWatchStableOnceThePeakHoldsForTheSteps(t *testing.T) {
	tr := newTrainer(Rule{Steps: 5})
	if s := tr.w.State(tr.t); s.Phase != Idle {
		t.Fatalf("an agent, nothing allocated: %v", s.Phase)
	}
	tr.steps(3, 100*mib, 50*mib)
	if s := tr.w.State(tr.t); s.Phase != Rising {
		t.Fatalf("after 3 steps: %+v", s)
	}
	// the optimizer's state comes at the end of the first steps: the
	// peak rises and the count starts again
	tr.steps(4, 180*mib, 50*mib)
	s := tr.w.State(tr.t)
	if s.Phase != Rising || s.HeldSteps > 4 {
		t.Fatalf("after the rise: %+v", s)
	}
	tr.steps(2, 180*mib, 50*mib)
	s = tr.w.State(tr.t)
	if s.Phase != Stable || s.Peak != 230*mib || s.ReservedPeak != 231*mib || !strings.Contains(s.Why, "held for 5 steps") {
		t.Fatalf("after 6 steps at one peak: %+v", s)
	}
}

// A rise smaller than the tolerance does not start the count again; a
// peak that keeps creeping up past it never becomes stable.
func TestWatchToleranceAndACreepingPeak(t *testing.T) {
	tr := newTrainer(Rule{Steps: 5})
	tr.steps(2, 100*mib, 100*mib)
	for i := range 6 {
		tr.steps(1, 100*mib, 100*mib+uint64(i)*100<<10) // 100 KiB a step: under 1 MiB
	}
	if s := tr.w.State(tr.t); s.Phase != Stable {
		t.Fatalf("small rises: %+v", s)
	}
	tr = newTrainer(Rule{Steps: 5})
	for i := range 20 {
		tr.steps(1, 100*mib, 100*mib+uint64(i)*2*mib) // a leak: 2 MiB a step
		if s := tr.w.State(tr.t); s.Phase == Stable {
			t.Fatalf("a peak rising 2 MiB a step was stable after %d steps: %+v", i+1, s)
		}
	}
}

func TestWatchStableAfterSecondsWithoutSteps(t *testing.T) {
	tr := newTrainer(Rule{Steps: 5, Seconds: 2 * time.Second})
	for range 150 { // 1.5 s flat: no step to count
		tr.sample(300 * mib)
	}
	if s := tr.w.State(tr.t); s.Phase != Rising || s.Steps != 0 {
		t.Fatalf("after 1.5 s: %+v", s)
	}
	s := tr.w.State(tr.t.Add(600 * time.Millisecond))
	if s.Phase != Stable || !strings.Contains(s.Why, "held for 2.1s") {
		t.Fatalf("after 2.1 s: %+v", s)
	}
}

// Rows the script makes count as steps where the allocated bytes show
// none (a step too short for the samples); the agent's own rows do not.
func TestWatchCountsTheScriptsRowsAsSteps(t *testing.T) {
	tr := newTrainer(Rule{Steps: 3})
	tr.sample(200 * mib)
	peak := uint64(200 * mib)
	row := func(label string, end bool) {
		tr.w.Frame(wire.Row{Type: wire.TypeRow, T: tr.t.UnixNano(), Label: label, Source: "agent", PID: 7, Peak: &peak, End: end})
	}
	row("Process start", false)
	row("Process end", true)
	if s := tr.w.State(tr.t); s.Steps != 0 {
		t.Fatalf("the agent's own rows counted: %+v", s)
	}
	for i := range 3 {
		row("step", false)
		if s := tr.w.State(tr.t); s.Steps != i+1 || (s.Phase == Stable) != (i == 2) {
			t.Fatalf("row %d: %+v", i+1, s)
		}
	}
}

func TestWatchOOMAndTheLedgerNearestThePeak(t *testing.T) {
	tr := newTrainer(Rule{Steps: 3})
	tr.steps(2, 100*mib, 50*mib)
	for _, a := range []uint64{120 * mib, 140 * mib, 130 * mib} {
		al := a
		tr.w.Frame(wire.Row{Type: wire.TypeRow, Label: "x", Source: "agent", PID: 7, Allocated: &al,
			Ledger: &wire.Ledger{Allocated: a, Activations: a - 100*mib, Uncounted: []string{"meta"}}})
	}
	tr.w.Frame(wire.OOM{Type: wire.TypeOOM, PID: 7, T: tr.t.UnixNano(), Requested: 1 << 30, Allocated: 150 * mib, Peak: 150 * mib, Limit: 1 << 30,
		Layout: &wire.Layout{}})
	s := tr.w.State(tr.t)
	if s.Phase != OutOfMemory || s.OOM.Requested != 1<<30 || s.OOM.Layout != nil {
		t.Fatalf("%+v", s)
	}
	if s.Ledger == nil || s.Ledger.Allocated != 140*mib || s.Ledger.Uncounted != nil {
		t.Fatalf("ledger %+v, want the row with the most allocated (140 MiB)", s.Ledger)
	}
}

func TestWatchWaitsForAnAgent(t *testing.T) {
	w := NewWatch(Rule{Seconds: time.Second})
	if s := w.State(time.Now().Add(time.Hour)); s.Phase != Waiting {
		t.Fatalf("%+v", s)
	}
}

// The hold starts at the first peak seen, however small (a few KiB of
// torch's own before the model): it is not counted from the epoch.
func TestWatchHoldStartsAtTheFirstPeak(t *testing.T) {
	tr := newTrainer(Rule{Steps: 5, Seconds: 20 * time.Second})
	tr.sample(74 << 10)
	if s := tr.w.State(tr.t); s.Phase != Rising || s.HeldFor > time.Second {
		t.Fatalf("after a first peak of 74 KiB: %+v", s)
	}
	tr.sample(95 * mib) // the model
	if s := tr.w.State(tr.t.Add(19 * time.Second)); s.Phase != Rising {
		t.Fatalf("19 s after the model: %+v", s)
	}
	if s := tr.w.State(tr.t.Add(21 * time.Second)); s.Phase != Stable {
		t.Fatalf("21 s after the model: %+v", s)
	}
}
