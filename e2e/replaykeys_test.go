package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// holdersRecording writes a 5 s recording of one agent process with holders
// reports at 1 s (512 MiB) and 3 s (64 MiB).
func holdersRecording(t *testing.T, path string) {
	t.Helper()
	in, done := testRecording(t, path, 100, "GPU-test", 80<<30)
	const pid = 4242
	in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"}, T: base,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-test"}}})
	for i := 0; i <= 500; i++ {
		tt := base + int64(i)*int64(10*time.Millisecond)
		in.NVML(0, tt, 2<<30, 512*mib)
		if i%10 == 0 {
			in.Apply(0, wire.Procs{Type: wire.TypeProcs, T: tt, Dev: 0, Procs: []wire.Proc{{PID: pid, Name: "python3", Used: 2 << 30}}})
			in.Apply(pid, wire.Sample{Type: wire.TypeSample, T: tt, Dev: 0, Allocated: 1 << 30, Reserved: 1536 * mib})
		}
		for _, h := range []struct {
			at    int
			bytes uint64
		}{{100, 512 * mib}, {300, 64 * mib}} {
			if i == h.at {
				in.Apply(pid, wire.Holders{Type: wire.TypeHolders, T: tt, ID: i, Dev: 0, Total: h.bytes,
					Groups: []wire.HolderGroup{{Kind: "other", Name: "cache", Bytes: h.bytes, Tensors: 1}}})
			}
		}
	}
	done()
}

// In a replay of a real recording file: it opens on its whole run (5 s,
// paused at the end); s adds no row and says why; h shows the holders
// report nearest before the cursor, its age measured from the cursor.
func TestReplayKeysInTerminal(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "holders.gputop")
	holdersRecording(t, rec)
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor("window whole run")
	tm.keys("s")
	tm.waitFor("a replay takes no snapshot")
	tm.keys("Enter")
	if scr := tm.screen(); strings.Contains(scr, "snapshot 1") || strings.Contains(scr, "snapshot label") {
		t.Fatalf("s in a replay opened a prompt or added a row:\n%s", scr)
	}
	tm.keys("h")
	scr := tm.waitFor("64.0 MiB in 1 group")
	if !strings.Contains(scr, "2s before the cursor") || strings.Contains(scr, " ago") {
		t.Errorf("h at the end should show the 3 s report, 2 s before the cursor:\n%s", scr)
	}
	tm.keys("Home")
	tm.waitFor("no holders report in this recording up to the cursor")
}
