package fit

import (
	"fmt"
	"sync"
	"time"

	"github.com/gputop/gputop/wire"
)

// Rule says when a child's peak is stable: it has not risen by more than
// the tolerance (Tolerance of it, at least MinRise) for Steps training
// steps or for Seconds, whichever comes first (0 turns either off).
type Rule struct {
	Steps   int
	Seconds time.Duration
}

// A rise of the peak smaller than this (or than Tolerance of the peak, the
// larger) does not count: a step's temporaries land a few bytes apart.
const (
	MinRise   = 1 << 20
	Tolerance = 0.005
)

// The step detector, as the agent's (agent/gputop/_layout.py) but over
// the samples since the peak last rose rather than a window of time (the
// state the optimizer adds after the first steps would hold a window's
// range open for its length): a step is a rise of the allocated bytes
// through the top quarter of their range since then, after a fall through
// its bottom quarter, the range being at least MinSwing.
const MinSwing = 1 << 20

// The labels of the rows gputop run's agent makes by itself: not steps.
const (
	labelStart = "Process start"
)

// Watch follows one child through the frames its agents send (it is the
// session's ingest.Tap): the allocator's peak, the training steps, the
// rows and their ledgers, an OOM. State says where it stands.
type Watch struct {
	mu      sync.Mutex
	rule    Rule
	streams map[[2]int]*stream // by (pid, torch device)
	agents  map[int]bool
	rows    int
	ledger  *wire.Ledger // the ledger of the row with the most allocated
	ledgerA uint64
	oom     *wire.OOM

	peak, reservedPeak uint64
	base               uint64 // the peak the hold is counted from
	baseAt             int64  // when it was reached (ns)
	baseSteps          int    // the steps seen then
}

// stream is one process-device's allocated bytes, for the steps.
type stream struct {
	fresh  bool // the range starts again at the next sample
	lo, hi uint64
	wasLow bool
	rises  int
}

// NewWatch is a Watch under rule.
func NewWatch(rule Rule) *Watch {
	return &Watch{rule: rule, streams: map[[2]int]*stream{}, agents: map[int]bool{}}
}

// NVML is the Tap's NVML sample: not the child's.
func (w *Watch) NVML(dev int, t int64, used, reserved uint64) {}

// Frame takes what the store kept of the child's agents.
func (w *Watch) Frame(f wire.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch v := f.(type) {
	case wire.Hello:
		w.agents[v.PID] = true
	case wire.Sample:
		w.sample(v)
	case wire.Row:
		w.row(v)
	case wire.OOM:
		if w.oom == nil {
			o := v
			o.Layout, o.Dump = nil, nil
			w.oom = &o
		}
		w.raise(v.Peak, 0, v.T)
	}
}

func (w *Watch) sample(s wire.Sample) {
	k := [2]int{s.PID, s.Dev}
	st := w.streams[k]
	if st == nil {
		st = &stream{fresh: true}
		w.streams[k] = st
	}
	st.add(s.Allocated)
	w.raise(s.Peak, s.ReservedPeak, s.T)
}

// raise takes a peak seen at t: a rise past the tolerance starts the hold
// again.
func (w *Watch) raise(peak, reserved uint64, t int64) {
	w.reservedPeak = max(w.reservedPeak, reserved)
	if peak <= w.peak {
		return
	}
	w.peak = peak
	// the first peak starts the hold, however small: the hold is counted
	// from a moment the child was seen allocating
	if w.baseAt == 0 || peak > w.base+max(MinRise, uint64(float64(w.base)*Tolerance)) {
		w.base, w.baseAt, w.baseSteps = peak, t, w.steps()
		for _, st := range w.streams {
			st.fresh = true
		}
	}
}

func (w *Watch) row(r wire.Row) {
	if r.Source != "agent" || r.Kind != "" || r.End || r.Label == labelStart {
		return
	}
	w.rows++
	if r.Peak != nil {
		w.raise(*r.Peak, 0, r.T)
	}
	if r.Ledger != nil && r.Ledger.Skipped == "" && (w.ledger == nil || r.Ledger.Allocated >= w.ledgerA) {
		l := *r.Ledger
		l.Uncounted = nil
		w.ledger, w.ledgerA = &l, l.Allocated
	}
}

// steps is the training steps seen: the rises of the allocated bytes of
// the process-device that counted most, or the rows the child made
// (gputop.snapshot, a framework callback's Step rows), whichever is more.
func (w *Watch) steps() int {
	n := w.rows
	for _, st := range w.streams {
		n = max(n, st.rises)
	}
	return n
}

func (st *stream) add(v uint64) {
	if st.fresh {
		st.fresh, st.lo, st.hi, st.wasLow = false, v, v, false
	}
	st.lo, st.hi = min(st.lo, v), max(st.hi, v)
	if st.hi-st.lo < MinSwing {
		return
	}
	span := st.hi - st.lo
	switch {
	case v >= st.hi-span/4:
		if st.wasLow {
			st.rises++
		}
		st.wasLow = false
	case v <= st.lo+span/4:
		st.wasLow = true
	}
}

// Phase is where a child stands.
type Phase int

const (
	Waiting     Phase = iota // no agent has said hello yet
	Idle                     // an agent, nothing allocated yet
	Rising                   // the peak has not held long enough yet
	Stable                   // the peak has held: measured
	OutOfMemory              // an allocation failed
)

// State is a child's standing at a moment.
type State struct {
	Phase        Phase
	Peak         uint64
	ReservedPeak uint64
	Steps        int           // training steps seen
	HeldSteps    int           // steps since the peak last rose
	HeldFor      time.Duration // time since it last rose
	Agents       int
	OOM          *wire.OOM
	Ledger       *wire.Ledger
	Why          string // what made it stable
}

// State is the child's standing at now.
func (w *Watch) State(now time.Time) State {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := State{Peak: w.peak, ReservedPeak: w.reservedPeak, Steps: w.steps(), Agents: len(w.agents), OOM: w.oom, Ledger: w.ledger}
	switch {
	case w.oom != nil:
		s.Phase = OutOfMemory
		return s
	case len(w.agents) == 0:
		s.Phase = Waiting
		return s
	case w.peak == 0:
		s.Phase = Idle
		return s
	}
	s.HeldSteps = s.Steps - w.baseSteps
	s.HeldFor = max(now.Sub(time.Unix(0, w.baseAt)), 0)
	s.Phase = Rising
	switch {
	case w.rule.Steps > 0 && s.HeldSteps >= w.rule.Steps:
		s.Phase, s.Why = Stable, fmt.Sprintf("the peak held for %d steps", s.HeldSteps)
	case w.rule.Seconds > 0 && s.HeldFor >= w.rule.Seconds:
		s.Phase, s.Why = Stable, fmt.Sprintf("the peak held for %s", s.HeldFor.Round(100*time.Millisecond))
	}
	return s
}
