package store

import (
	"testing"

	"github.com/gputop/gputop/wire"
)

// An agent keeps its newest MaxHoldersPast holders reports for a replay's
// cursor; HoldersAt finds the newest at or before an instant.
func TestHoldersPastBoundAndLookup(t *testing.T) {
	st := New(DefaultOptions())
	st.AgentHello(wire.Hello{PID: 7, T: 1, Devices: []wire.AgentDevice{}})
	n := MaxHoldersPast + 6
	for i := 1; i <= n; i++ {
		st.AgentHolders(7, wire.Holders{Type: wire.TypeHolders, T: int64(i * 10), ID: i})
	}
	a := st.Agents()[0]
	if len(a.HoldersPast) != MaxHoldersPast || a.HoldersPast[0].ID != 7 || a.HoldersPast[MaxHoldersPast-1].ID != n {
		t.Fatalf("kept %d reports, ids %d..%d; want %d, 7..%d", len(a.HoldersPast), a.HoldersPast[0].ID, a.HoldersPast[len(a.HoldersPast)-1].ID, MaxHoldersPast, n)
	}
	if b := st.Bounds(); b.HoldersDropped != 6 {
		t.Errorf("HoldersDropped = %d, want the 6 past the newest %d", b.HoldersDropped, MaxHoldersPast)
	}
	if h := a.HoldersAt(305); h == nil || h.ID != 30 {
		t.Errorf("HoldersAt(305) = %+v, want report 30", h)
	}
	if h := a.HoldersAt(69); h != nil {
		t.Errorf("HoldersAt before the oldest kept = %+v, want nil", h)
	}
}
