package ingest

import (
	"testing"

	"github.com/gputop/gputop/wire"
)

// A key's row asks its agent for a walk; the answer's ledger reaches the
// row, and the Tap gets it in a held frame, so a recording keeps it.
func TestHoldersAnswerLedgerReachesTheTap(t *testing.T) {
	in, tap := endRowSetup(t)
	in.SetAsker(func(pid, torchDev int) error { return nil })
	in.Apply(7, wire.Mark{Type: wire.TypeMark, T: 12, Label: "step", Devs: []wire.DevStats{{Dev: 1, Allocated: 100, Reserved: 200, Peak: 100,
		Ledger: &wire.Ledger{T: 12, Allocated: 100, Reserved: 200, Params: 60}}}})
	if r, ok := tap.frames[len(tap.frames)-1].(wire.Row); !ok || r.Ledger == nil || r.Ledger.Params != 60 {
		t.Fatalf("the mark's row to the Tap: %#v", tap.frames[len(tap.frames)-1])
	}
	in.TakeSnapshot("look", 0, 13, "key", nil)
	in.Apply(7, wire.Holders{Type: wire.TypeHolders, T: 15, Dev: 1, Held: &wire.Held{T: 14, Allocated: 100, Python: 100},
		Ledger: &wire.Ledger{T: 14, Allocated: 100, Reserved: 200, Params: 70, Optimizer: 20}})
	h, ok := tap.frames[len(tap.frames)-1].(wire.RowHeld)
	if !ok || h.PID != 7 || h.T != 13 || h.Dev != 0 || h.Ledger == nil || h.Ledger.Params != 70 || h.Held == nil {
		t.Fatalf("last frame to the Tap %#v, want the key row's ledger in a held frame", tap.frames[len(tap.frames)-1])
	}
	rows := in.Store().Rows()
	if r := rows[len(rows)-1]; r.Label != "look" || r.Ledger == nil || r.Ledger.Optimizer != 20 || r.Held != nil {
		t.Fatalf("the key's row %+v", r)
	}
}
