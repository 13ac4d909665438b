package wire

import (
	"strings"
	"testing"
)

// A dump's phases are checked where the frame enters: a negative time is
// refused with the field named; a dump without phases (an older agent's)
// passes as before.
func TestCheckDumpPhases(t *testing.T) {
	oom := func(d *Dump) OOM { return OOM{Type: TypeOOM, T: 1, Dev: 0, Dump: d} }
	ok := &Dump{Path: "/d/x.pickle", TookMS: 3, GILMS: 1,
		Phases: &DumpPhases{TakeMS: 2, TakeCPUMS: 1, PickleMS: 0.1, WriteMS: 0.2, FsyncMS: 0.5, PlaceMS: 0.2}}
	if err := Check(oom(ok)); err != nil {
		t.Fatalf("a dump with phases refused: %v", err)
	}
	if err := Check(oom(&Dump{Path: "/d/x.pickle", TookMS: 3})); err != nil {
		t.Fatalf("a dump without phases refused: %v", err)
	}
	bad := *ok
	ph := *ok.Phases
	ph.FsyncMS = -1
	bad.Phases = &ph
	if err := Check(oom(&bad)); err == nil || !strings.Contains(err.Error(), `"dump.phases"`) {
		t.Fatalf("a negative phase: got %v", err)
	}
}
