package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// leakRecording writes a real recording of two training processes on one
// 16 GiB GPU, 40 steps of a second each with a "Step N" row after each
// (the callbacks' every_n_steps rows), their allocated sampled every
// 100 ms: pid 4242 leaks 64 MiB a step from 2 GiB under a 1 GiB
// transient, pid 4343 stays at 1 GiB under the same transient.
func leakRecording(t *testing.T, path string) {
	t.Helper()
	in, done := testRecording(t, path, 100, "GPU-leak", 16<<30)
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
	done()
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
		"GPU 0 (Test GPU), pid 4343: forecast at Step 40: stable: steps 1–40 (40 rows), baseline 1.00 GiB, peak 2.00 GiB of 16.00 GiB",
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
	scr := tm.waitFor("forecast, pid 4242: OOM in about 169 steps at this rate, near step 209, ~3 min; cause: unknown (no ledger at the rows)")
	for _, want := range []string{
		"forecast, pid 4343: stable",
		"forecast: OOM in about 169 steps at this rate: +64.0 MiB a step (baseline), 10.56 GiB left of 16.00 GiB (the GPU's total), near step 209",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the screen lacks %q:\n%s", want, scr)
		}
	}
}

// `gputop serve --metrics` with processes over the real socket: one whose
// step rows leak under the cap its marks say (set_per_process_memory_fraction:
// 16 GiB of the GPU's 80) has its steps to the OOM against that cap; a
// stable one has no forecast series.
func TestForecastMetricsServe(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := exec.Command(binary, "serve", "--source", "agent", "--socket", sock, "--metrics", addr)
	stderr := &lockedBuffer{}
	srv.Stderr = stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	stderr.waitFor(t, "metrics: serving http://"+addr+"/metrics")
	now := time.Now()
	for _, p := range []struct {
		pid  int
		leak uint64
	}{{5400, 120 * mib}, {5401, 0}} {
		a := startRankAgent(t, sock, p.pid, 0)
		for i := 1; i <= 26; i++ {
			b := uint64(2<<30) + uint64(i-1)*p.leak
			tt := now.Add(-time.Duration(26-i) * time.Second)
			a.send(`{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d}`, tt.Add(-500*time.Millisecond).UnixNano(), b+1<<30, b+1<<30, b+1<<30)
			a.send(`{"type":"mark","t":%d,"label":"Step %d","devs":[{"dev":0,"allocated":%d,"reserved":%d,"peak":%d,"limit":%d}]}`,
				tt.UnixNano(), i, b+p.leak, b+1<<30, b+1<<30, 16<<30)
		}
	}
	forecast := func(n string) bool { return strings.HasPrefix(n, "gputop_torch_forecast_") }
	// at step 26 the peak is 3 GiB + 25·120 MiB: 16 GiB is 85.9 steps on
	var got map[string]string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got = scrapeSeries(t, addr, forecast); len(got) >= 2 {
			break
		}
	}
	steps, _ := strconv.ParseFloat(got["gputop_torch_forecast_steps_to_oom{5400,,}"], 64)
	secs, _ := strconv.ParseFloat(got["gputop_torch_forecast_seconds_to_oom{5400,,}"], 64)
	if len(got) != 2 || steps < 85.5 || steps > 86.5 || secs < 85 || secs > 87 {
		t.Fatalf("forecast series %v", got)
	}
}

// A process whose forecast predicts an OOM is asked, over the real socket,
// for a holders walk; its answer names the holder in the forecast's cause,
// which the recording keeps for export.
func TestForecastAsksForAWalkAndNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	rec := filepath.Join(dir, "rec.gputop")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", rec)
	waitFile(t, sock)
	a := startRankAgent(t, sock, 4242, 0)
	leakSteps(a, 26)
	a.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := bufio.NewReader(a.c).ReadString('\n')
	if err != nil {
		t.Fatalf("no request came: %v\n%s", err, r.stderr)
	}
	var req wire.Request
	if err := json.Unmarshal([]byte(line), &req); err != nil || req.What != wire.RequestHolders || req.Dev == nil || *req.Dev != 0 {
		t.Fatalf("request %q: %v", line, err)
	}
	r.stderr.waitFor(t, "pid 4242 on GPU 0: its forecast says OOM; asked its agent for a holders walk")
	a.send(`{"type":"holders","t":%d,"id":%d,"dev":0,"total":4294967296,"skipped":0,"groups":[`+
		`{"kind":"parameters","name":"model","bytes":1073741824,"tensors":4},{"kind":"container","name":"losses","bytes":3221225472,"tensors":26}]}`,
		time.Now().UnixNano(), req.ID)
	r.stderr.waitFor(t, "holders")
	time.Sleep(500 * time.Millisecond)
	if code := r.stop(); code != 0 {
		t.Fatalf("record exited %d:\n%s", code, r.stderr)
	}
	out, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	if code != 0 || !strings.Contains(out, "cause: unknown (no ledger at the rows); the largest holder outside the model and its optimizer at the last holders walk: `losses`") {
		t.Fatalf("export (exit %d):\n%s", code, out)
	}
}
