package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// endRowSetup is an Ingest with a Tap and one agent process (pid 7, torch
// cuda:1 on NVML's GPU 0) with a sample, for an end row.
func endRowSetup(t *testing.T) (*Ingest, *tapRec) {
	t.Helper()
	in := New(store.New(store.DefaultOptions()))
	tap := &tapRec{}
	in.SetTap(tap)
	in.Device(store.Device{Index: 0, UUID: "GPU-0"})
	in.Apply(7, wire.Hello{Type: wire.TypeHello, PID: 7, T: 10, Devices: []wire.AgentDevice{{Index: 1, UUID: "GPU-0"}}})
	in.Apply(7, wire.Sample{Type: wire.TypeSample, T: 11, Dev: 1, Allocated: 100})
	return in, tap
}

// An end row asks its agent, through the Ingest's asker, for a holders
// walk of the agent's own torch device, and waits for the answer.
func TestEndRowAsksThroughTheAsker(t *testing.T) {
	in, _ := endRowSetup(t)
	var asked [][2]int
	in.SetAsker(func(pid, torchDev int) error {
		asked = append(asked, [2]int{pid, torchDev})
		return nil
	})
	rows := in.TakeSnapshot("After cleanup", 0, 12, "key", nil)
	if len(rows) != 1 || !rows[0].End || !rows[0].Awaiting || rows[0].Held != nil {
		t.Fatalf("rows %+v", rows)
	}
	if len(asked) != 1 || asked[0] != [2]int{7, 1} {
		t.Fatalf("asked %v, want pid 7 for torch device 1", asked)
	}
	// not an end row: asked too, for the walk's ledger only
	rows = in.TakeSnapshot("Epoch 1", 0, 13, "key", nil)
	if len(rows) != 1 || rows[0].End || !rows[0].Awaiting || len(asked) != 2 || asked[1] != [2]int{7, 1} {
		t.Fatalf("a row that ends nothing: rows %+v, asked %v", rows, asked)
	}
}

// An ask that cannot be sent gives the row its reason, and the Tap the
// row's attribution, so a recording keeps why no walk came.
func TestEndRowAskThatFails(t *testing.T) {
	in, tap := endRowSetup(t)
	in.SetAsker(func(pid, torchDev int) error { return errors.New("pid 7 is not reading requests") })
	in.TakeSnapshot("After cleanup", 0, 12, "key", nil)
	row := in.Store().Rows()[0]
	if row.Held == nil || row.Held.Skipped != "could not ask for a holders walk: pid 7 is not reading requests" {
		t.Fatalf("row %+v", row)
	}
	last := tap.frames[len(tap.frames)-1]
	if h, ok := last.(wire.RowHeld); !ok || h.PID != 7 || h.T != 12 || h.Held == nil || !strings.Contains(h.Held.Skipped, "not reading requests") {
		t.Fatalf("last frame to the Tap %#v, want the row's attribution", last)
	}
}

// Without an asker (no agent socket: a replay, --source nvml, only --ssh
// hosts) an end row says so at once instead of waiting for a walk.
func TestEndRowWithoutAnAsker(t *testing.T) {
	in, _ := endRowSetup(t)
	rows := in.TakeSnapshot("After cleanup", 0, 12, "key", nil)
	if len(rows) != 1 || rows[0].Awaiting || rows[0].Held == nil || !strings.Contains(rows[0].Held.Skipped, "no agent socket here") {
		t.Fatalf("rows %+v", rows)
	}
}
