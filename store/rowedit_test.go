package store

import (
	"testing"

	"github.com/gputop/gputop/wire"
)

// An OOM's row renamed keeps its marker (kind oom) in step; a deleted row
// takes its marker with it and leaves the other rows as they were.
func TestEditRowKeepsMarkersInStep(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0", Name: "g", Total: 1 << 30})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 9, T: 100 * ms, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentOOM(9, wire.OOM{Type: wire.TypeOOM, T: 500 * ms, Dev: 0, Requested: 1 << 30, Allocated: 10, Reserved: 20, Peak: 30})
	st.AddRow(wire.Row{T: 600 * ms, Label: "after", Dev: 0, PID: 9, Source: "key"})
	if _, _, ok := st.EditRow(wire.RowEdit{T: 500 * ms, Dev: 0, PID: 9, Label: wire.LabelOOM, Rename: "the big OOM"}); !ok {
		t.Fatal("the OOM row was not found")
	}
	if _, _, ok := st.EditRow(wire.RowEdit{T: 600 * ms, Dev: 0, PID: 9, Label: "after", Delete: true}); !ok {
		t.Fatal("the row was not found")
	}
	rows, marks := st.Rows(), st.Markers()
	if len(rows) != 1 || rows[0].Label != "the big OOM" || rows[0].OOM == nil {
		t.Fatalf("rows: %+v", rows)
	}
	if len(marks) != 1 || marks[0].Label != "the big OOM" || marks[0].Kind != "oom" {
		t.Fatalf("markers: %+v", marks)
	}
	// an edit of a row of another process, device or time finds nothing
	for _, e := range []wire.RowEdit{
		{T: 500 * ms, Dev: 0, PID: 8, Label: "the big OOM", Delete: true},
		{T: 500 * ms, Dev: 1, PID: 9, Label: "the big OOM", Delete: true},
		{T: 501 * ms, Dev: 0, PID: 9, Label: "the big OOM", Delete: true},
	} {
		if _, _, ok := st.EditRow(e); ok {
			t.Errorf("edit %+v found a row", e)
		}
	}
}
