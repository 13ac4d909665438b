package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// leakRecording writes a real recording of two training processes on one
// 16 GiB GPU, 40 steps of a second each with a "Step N" row after each
// (the callbacks' every_n_steps rows), their allocated sampled every
// 100 ms: pid 4242 leaks 64 MiB a step from 2 GiB under a 1 GiB
// transient, pid 4343 stays at 1 GiB under the same transient.
func leakRecording(t *testing.T, path string) {
	t.Helper()
	w, err := recording.Create(path, wire.Recording{Type: wire.TypeRecording, V: wire.Version, Start: base, Tool: "test", RateHz: 100})
	if err != nil {
		t.Fatal(err)
	}
	in := ingest.New(store.New(store.DefaultOptions()))
	in.SetTap(w)
	in.Device(store.Device{Index: 0, UUID: "GPU-leak", Name: "Test GPU", Total: 16 << 30, Source: "nvml"})
	for _, pid := range []int{4242, 4343} {
		in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"}, Torch: "2.11.0", T: base,
			Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-leak", Name: "Test GPU", Total: 16 << 30}}})
	}
	for step := 1; step <= 40; step++ {
		for _, p := range []struct {
			pid        int
			base, leak uint64
		}{{4242, 2 << 30, 64 * mib}, {4343, 1 << 30, 0}} {
			b := p.base + uint64(step-1)*p.leak
			start := base + int64(step-1)*int64(time.Second)
			for i := range 10 {
				v := b
				if i >= 3 && i < 7 {
					v += 1 << 30 // forward and backward
				}
				if i >= 7 {
					v += p.leak
				}
				in.Apply(p.pid, wire.Sample{Type: wire.TypeSample, T: start + int64(i)*int64(100*time.Millisecond), Dev: 0,
					Allocated: v, Reserved: b + 1<<30 + p.leak, Peak: b + 1<<30})
			}
			in.Apply(p.pid, wire.Mark{Type: wire.TypeMark, T: start + int64(time.Second) - 1, Label: fmt.Sprintf("Step %d", step),
				Devs: []wire.DevStats{{Dev: 0, Allocated: b + p.leak, Reserved: b + 1<<30 + p.leak, Peak: b + 1<<30}}})
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A recording with known linear growth: export names the step the OOM
// would come at (the peak of step 40 is 2 GiB + 39·64 MiB + 1 GiB, so
// 16 GiB is 169 steps on, at step 209) and calls the flat process stable.
func TestExportForecasts(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "leak.gputop")
	leakRecording(t, rec)
	out, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{
		"GPU 0 (Test GPU), pid 4242: forecast at Step 40: OOM in about 169 steps at this rate: +64.0 MiB a step (baseline), 10.56 GiB left of 16.00 GiB (the GPU's total), near step 209, ~3 min; cause: unknown (no ledger at the rows)",
		"GPU 0 (Test GPU), pid 4343: forecast at Step 40: stable: steps 1–40 (40 rows), baseline 1.00 GiB, peak 2.00 GiB of 16.00 GiB (the GPU's total)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks\n  %s\nin:\n%s", want, out)
		}
	}
}

// The same recording replayed in a real terminal: at its end the summary
// says each process's forecast, and the process pane the selected one's
// in full.
func TestForecastInTerminal(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "leak.gputop")
	leakRecording(t, rec)
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor("Test GPU")
	tm.keys("End")
	scr := tm.waitFor("forecast, pid 4242: OOM in about 169 steps at this rate")
	for _, want := range []string{
		"forecast, pid 4343: stable",
		"forecast: OOM in about 169 steps at this rate: +64.0 MiB a step (baseline), 10.56 GiB left of 16.00 GiB (the GPU's total), near step 209",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the screen lacks %q:\n%s", want, scr)
		}
	}
}
