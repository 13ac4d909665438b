package store

import (
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// A dump's log line says where its time went when the agent says so, and
// stays as it was for an agent that does not.
func TestDumpLineNamesThePhases(t *testing.T) {
	d := &wire.Dump{Path: "/d/1-OOM.pickle", Bytes: 5 << 10, TookMS: 14.5, GILMS: 2.25,
		Phases: &wire.DumpPhases{WaitMS: 0, TakeMS: 12.4, TakeCPUMS: 1.5, PickleMS: 0.1,
			WriteMS: 0.3, FsyncMS: 1.6, PlaceMS: 0.1}}
	got := DumpLine(7, wire.LabelOOM, d)
	want := `pid 7: memory dump at "OOM": /d/1-OOM.pickle (0.0 MiB; 14 ms, GIL held 2 ms: ` +
		`wait 0.0 ms, torch 12 ms (CPU 1.5 ms), pickle 0.1 ms, write 0.3 ms, fsync 1.6 ms, place 0.1 ms)`
	if got != want {
		t.Fatalf("DumpLine:\n got %s\nwant %s", got, want)
	}
	d.Phases.ImportMS = 5191.7
	if got := DumpLine(7, wire.LabelOOM, d); !strings.Contains(got, "wait 0.0 ms, torch importing torch._inductor 5192 ms, torch 12 ms (CPU 1.5 ms)") {
		t.Fatalf("DumpLine with an import: %s", got)
	}
	d.Phases = nil
	if got, want := DumpLine(7, wire.LabelOOM, d), `pid 7: memory dump at "OOM": /d/1-OOM.pickle (0.0 MiB; 14 ms, GIL held 2 ms)`; got != want {
		t.Fatalf("DumpLine without phases:\n got %s\nwant %s", got, want)
	}
}
