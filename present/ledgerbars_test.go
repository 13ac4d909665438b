package present

import (
	"fmt"
	"testing"

	"github.com/gputop/gputop/wire"
)

// The stacked view's bars: the selected agent process's rows with a
// ledger in the window, at most one per chart cell (the newest of those
// sharing one), none without the query asking; a row without a ledger
// has no bar.
func TestLedgerBars(t *testing.T) {
	st := screenStore()
	// rows with ledgers every 100 ms from 2 s to 6 s, one without at 6.5 s
	for i := 0; i <= 40; i++ {
		at := 2*sec + int64(i)*sec/10
		l := &wire.Ledger{T: at, Allocated: 1 << 30, Reserved: 3 << 29, Params: uint64(i) << 20}
		st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: at, Label: fmt.Sprintf("step %d", i),
			Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 30, Reserved: 3 << 29, Peak: 1 << 30, Ledger: l}}})
	}
	st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: 6*sec + sec/2, Label: "no ledger",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 30, Reserved: 3 << 29, Peak: 1 << 30}}})
	p := NewPresenter()
	q := Query{Cursor: 7 * sec, Replay: true, From: 0, To: 8 * sec, Cols: 16, Ledger: true}
	s := p.Screen(st, q)
	// 8 cells of a second: 2 s..6 s holds rows in the cells 2, 3, 4, 5, 6
	if len(s.Ledger) != 5 || s.LedgerNote != "" {
		t.Fatalf("%d bars (note %q), want one in each of 5 cells", len(s.Ledger), s.LedgerNote)
	}
	for i, b := range s.Ledger {
		want := min(9+10*i, 40) // the newest row of its second
		if b.Label != fmt.Sprintf("step %d", want) || b.Ledger.Parts[0].Bytes != uint64(want)<<20 {
			t.Errorf("bar %d: %q with params %d, want step %d's", i, b.Label, b.Ledger.Parts[0].Bytes, want)
		}
	}
	q.Ledger = false
	if s := p.Screen(st, q); s.Ledger != nil {
		t.Errorf("bars without the query asking: %d", len(s.Ledger))
	}
	q.Ledger, q.From, q.To = true, 6*sec+sec/4, 8*sec
	if s := p.Screen(st, q); len(s.Ledger) != 0 || s.LedgerNote != "ledger: pid 42 has no row with a ledger in this window" {
		t.Errorf("a window with only a row without a ledger: %d bars, note %q", len(s.Ledger), s.LedgerNote)
	}
}
