package store

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// a ledger of allocated 1000 (of reserved 2000) whose parts claim 900
func testLedger(t int64) *wire.Ledger {
	return &wire.Ledger{T: t, Allocated: 1000, Reserved: 2000, Params: 400, Grads: 100, Optimizer: 200, Activations: 100, OtherTensors: 60, Workspace: 40}
}

// A mark's ledger is its row's, its text made printable and its list held
// to the wire's bounds; a ledger whose parts add up to more than its
// allocated bytes keeps no figures and says why.
func TestMarkLedgerOnItsRow(t *testing.T) {
	st, at := agentSetup(t)
	l := testLedger(at(2))
	l.Uncounted = []string{"a meta tensor \x1b[31m"}
	for range wire.MaxUncounted {
		l.Uncounted = append(l.Uncounted, "more")
	}
	bad := testLedger(at(3))
	bad.OtherTensors = 500
	st.AgentMark(100, wire.Mark{T: at(2), Label: "step 1", Devs: []wire.DevStats{{Dev: 0, Allocated: 1000, Reserved: 2000, Peak: 1000, Ledger: l}}})
	st.AgentMark(100, wire.Mark{T: at(3), Label: "step 2", Devs: []wire.DevStats{{Dev: 0, Allocated: 1000, Reserved: 2000, Peak: 1000, Ledger: bad}}})
	st.AgentMark(100, wire.Mark{T: at(4), Label: "step 3", Devs: []wire.DevStats{{Dev: 0, Allocated: 1000, Reserved: 2000, Peak: 1000}}})
	rows := st.Rows()
	got := rows[0].Ledger
	if got == nil || got.Params != 400 || got.Workspace != 40 || got.Skipped != "" || got.Unattributed() != 100 {
		t.Fatalf("step 1's ledger %+v", got)
	}
	if len(got.Uncounted) != wire.MaxUncounted || strings.ContainsRune(got.Uncounted[0], 0x1b) {
		t.Fatalf("step 1's uncounted %q", got.Uncounted)
	}
	if l.Uncounted[0] != "a meta tensor \x1b[31m" {
		t.Fatal("the mark's own ledger was changed")
	}
	if b := rows[1].Ledger; b == nil || b.Skipped == "" || !strings.Contains(b.Skipped, "add up to more than its allocated bytes") || b.Params != 0 {
		t.Fatalf("step 2's ledger %+v", b)
	}
	if rows[2].Ledger != nil {
		t.Fatalf("step 3 came without one: %+v", rows[2].Ledger)
	}
	latest := st.LatestLedgers()
	if len(latest) != 1 || latest[0].Row.Label != "step 1" || latest[0].PID != 100 {
		t.Fatalf("latest ledgers %+v", latest)
	}
}

// A holders walk that answers after the rows that asked for it gives its
// ledger to them: an end row (with its attribution) and a key's row (its
// ledger only), and reports both for the recording. A walk without a
// ledger ends a key row's wait saying so; an agent that ends first, too.
func TestHoldersAnswerGivesItsLedger(t *testing.T) {
	st, at := agentSetup(t)
	end, _ := st.TakeSnapshot("After cleanup", 0, at(7), "key", nil, true)
	key, asks := st.TakeSnapshot("look", 0, at(7.5), "key", nil, true)
	if len(asks) != 1 || !key[0].Awaiting || key[0].End || !end[0].Awaiting {
		t.Fatalf("key row %+v, asks %+v", key[0], asks)
	}
	_, given, ok := st.AgentHolders(100, wire.Holders{Type: wire.TypeHolders, T: at(8), Dev: 0,
		Held: &wire.Held{T: at(7.9), Allocated: 1000, Python: 1000}, Ledger: testLedger(at(7.9))})
	if !ok || len(given) != 2 {
		t.Fatalf("given %+v", given)
	}
	for _, a := range given {
		if a.Ledger == nil || a.Ledger.Params != 400 || a.Held == nil {
			t.Fatalf("attribution for the recording %+v", a)
		}
	}
	for _, r := range st.Rows() {
		switch r.Label {
		case "After cleanup":
			if r.Held == nil || r.Ledger == nil || r.Ledger.Params != 400 {
				t.Fatalf("end row %+v", r)
			}
		case "look":
			if r.Held != nil || r.Ledger == nil || r.Ledger.Params != 400 {
				t.Fatalf("key row %+v", r)
			}
		}
	}

	// a walk that sends only a ledger leaves an end row waiting for its
	// attribution, and the ledger with it
	st.TakeSnapshot("After cleanup 2", 0, at(8.2), "key", nil, true)
	_, given, _ = st.AgentHolders(100, wire.Holders{Type: wire.TypeHolders, T: at(8.3), Dev: 0, Ledger: testLedger(at(8.3))})
	if len(given) != 0 {
		t.Fatalf("a ledger-only answer gave an end row %+v", given)
	}
	_, given, _ = st.AgentHolders(100, wire.Holders{Type: wire.TypeHolders, T: at(8.4), Dev: 0,
		Held: &wire.Held{T: at(8.35), Allocated: 1000, Python: 1000}, Ledger: testLedger(at(8.35))})
	if len(given) != 1 || given[0].Held == nil || given[0].Held.Python != 1000 || given[0].Ledger == nil || given[0].Ledger.T != at(8.35) {
		t.Fatalf("the end row's attribution: %+v", given)
	}

	// an agent from before ledgers: its answer ends a key row's wait
	st.TakeSnapshot("look 2", 0, at(8.5), "key", nil, true)
	_, given, _ = st.AgentHolders(100, wire.Holders{Type: wire.TypeHolders, T: at(9), Dev: 0, Held: &wire.Held{T: at(8.9), Allocated: 1000, Python: 1000}})
	if len(given) != 1 || given[0].Ledger == nil || !strings.Contains(given[0].Ledger.Skipped, "without a ledger") {
		t.Fatalf("answer without a ledger: %+v", given)
	}
	// the process ends before it answers
	st.TakeSnapshot("look 3", 0, at(9.5), "key", nil, true)
	_, given, _ = st.AgentEnded(100, at(9.8), false, "killed")
	if len(given) != 1 || given[0].Ledger == nil || !strings.Contains(given[0].Ledger.Skipped, "ended before") {
		t.Fatalf("ended: %+v", given)
	}
	// a recording's held frame gives a ledger to the row that waited for it
	st2, at2 := agentSetup(t)
	st2.AddRow(wire.Row{T: at2(7), Label: "look", Dev: 0, PID: 100, Source: "key", Allocated: ptr(uint64(1000)), Awaiting: true})
	st2.AddRow(wire.Row{T: at2(7), Label: "step", Dev: 0, PID: 100, Source: "agent", Allocated: ptr(uint64(1000))})
	given = st2.SetHeld(100, 0, at2(7), &wire.Held{T: at2(7.1), Python: 1}, testLedger(at2(7.1)), nil)
	if len(given) != 1 || given[0].Ledger == nil {
		t.Fatalf("recorded held frame: %+v", given)
	}
	for _, r := range st2.Rows() {
		if (r.Label == "look") != (r.Ledger != nil) || r.Held != nil {
			t.Fatalf("%s: ledger %+v held %+v", r.Label, r.Ledger, r.Held)
		}
	}
}

// NVML's figure for a process at a time: the last process list at or
// before it, no older than asked; what a series did over an interval.
func TestProcUsedAtAndSpanOf(t *testing.T) {
	st, at := agentSetup(t)
	st.SetProcs(0, at(2), []wire.Proc{{PID: 100, Used: 5000}})
	st.SetProcs(0, at(3), []wire.Proc{{PID: 100, Used: 6000}})
	if v, when, ok := st.ProcUsedAt(0, 100, at(3.5), time.Second); !ok || v != 6000 || when != at(3) {
		t.Fatalf("at 3.5 s: %d at %d, %v", v, when, ok)
	}
	if _, _, ok := st.ProcUsedAt(0, 100, at(5), time.Second); ok {
		t.Fatal("a list 2 s old answered for 1 s")
	}
	if _, _, ok := st.ProcUsedAt(0, 100, at(1), time.Second); ok {
		t.Fatal("answered before the first list")
	}
	// pid 100's allocated is 1000+i at 1+i/10 s
	sp := st.SpanOf(Key{0, 100, Allocated}, at(2), at(3))
	if !sp.OK || !sp.Exact || sp.Min != 1011 || sp.Max != 1020 {
		t.Fatalf("span (2 s, 3 s]: %+v", sp)
	}
	if sp := st.SpanOf(Key{0, 100, Allocated}, at(20), at(21)); sp.OK {
		t.Fatalf("span with no sample: %+v", sp)
	}
	if ts, v, first, ok := st.OldestSample(Key{0, 100, Allocated}); !ok || !first || ts != at(1) || v != 1000 {
		t.Fatalf("oldest sample %d %d %v %v", ts, v, first, ok)
	}
}

func ptr[T any](v T) *T { return &v }
