package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// alertEvent is the part of an --alert event the tests read.
type alertEvent struct {
	Event    string `json:"event"`
	PID      int    `json:"pid"`
	Device   int    `json:"device"`
	Message  string `json:"message"`
	Forecast *struct {
		Unit  string  `json:"unit"`
		In    float64 `json:"in"`
		Low   float64 `json:"low"`
		High  float64 `json:"high"`
		At    float64 `json:"at"`
		Limit string  `json:"limit"`
	} `json:"forecast"`
	OOM *struct {
		Requested uint64 `json:"requested_bytes"`
		Limit     uint64 `json:"limit_bytes"`
	} `json:"oom"`
	Verdict *struct {
		Mark  string `json:"mark"`
		Label string `json:"label"`
	} `json:"verdict"`
}

// readEvents reads the events an alert command appended to path, waiting
// (at most 15 s) until there are n; then it waits a little longer for
// any that should not be there.
func readEvents(t *testing.T, path string, n int) []alertEvent {
	t.Helper()
	read := func() []alertEvent {
		var evs []alertEvent
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e alertEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: not an event: %q", path, sc.Text())
			}
			evs = append(evs, e)
		}
		return evs
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(read()) < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // the watcher looks once a second
	return read()
}

// oomFrame is an OOM of 2 GiB asked under a 16 GiB cap
// (set_per_process_memory_fraction) on the agent's 80 GiB GPU.
func oomFrame() string {
	return fmt.Sprintf(`{"type":"oom","t":%d,"dev":0,"requested":2147483648,"free":1073741824,"limit":17179869184,"allocated":15032385536,"reserved":16106127360,"peak":16106127360}`,
		time.Now().UnixNano())
}

// leakSteps sends n "Step N" rows a second apart, ending now: allocated
// growing 120 MiB a step from 2 GiB, with a 1 GiB transient between rows.
func leakSteps(a *rankAgent, n int) {
	now := time.Now()
	for i := 1; i <= n; i++ {
		b := uint64(2<<30) + uint64(i-1)*120*mib
		t := now.Add(-time.Duration(n-i) * time.Second)
		a.send(`{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d}`, t.Add(-500*time.Millisecond).UnixNano(), b+1<<30, b+1<<30, b+1<<30)
		a.send(`{"type":"mark","t":%d,"label":"Step %d","devs":[{"dev":0,"allocated":%d,"reserved":%d,"peak":%d}]}`, t.UnixNano(), i, b+120*mib, b+1<<30, b+1<<30)
	}
}

// endRowHeld is an end row whose holders walk finds `losses` holding
// 1 GiB: its verdict is ✗.
func endRowHeld() string {
	t := time.Now().UnixNano()
	return fmt.Sprintf(`{"type":"mark","t":%d,"label":"After cleanup","end":true,"devs":[{"dev":0,"allocated":1073741824,"reserved":1073741824,"peak":1073741824,`+
		`"held":{"t":%d,"allocated":1073741824,"python":1073741824,"internal":0,"unaccounted":0,"top":[{"kind":"variable","name":"losses","bytes":1073741824,"tensors":10}]}}]}`, t, t)
}

// `gputop record --alert`: an OOM, an end row whose verdict is ✗ and a
// forecast that falls under --alert-steps each run the command once, with
// the event as JSON on its standard input; a second OOM of the process
// within the minute is dropped, and record's stderr says so.
func TestAlertsRecordOncePerEvent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	events := filepath.Join(dir, "events")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", filepath.Join(dir, "rec.gputop"),
		"--alert", "cat >> "+events, "--alert-steps", "100")
	waitFile(t, sock)
	a := startRankAgent(t, sock, 4242, 0)
	a.send("%s", oomFrame())
	r.stderr.waitFor(t, "alert oom (pid 4242 on GPU 0): ran the alert command")
	a.send("%s", oomFrame())
	r.stderr.waitFor(t, "alert oom (pid 4242 on GPU 0): not run, one ran")
	a.send("%s", endRowHeld())
	// under the OOM's 16 GiB cap: at step 26 the peak is 3 GiB + 25·120
	// MiB, 86 steps from the cap
	leakSteps(a, 26)
	evs := readEvents(t, events, 3)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3 (oom, verdict, forecast): %+v\nstderr:\n%s", len(evs), evs, r.stderr)
	}
	kinds := map[string]alertEvent{}
	for _, e := range evs {
		kinds[e.Event] = e
		if e.PID != 4242 || e.Device != 0 || e.Message == "" {
			t.Errorf("event %+v", e)
		}
	}
	if e := kinds["oom"]; e.OOM == nil || e.OOM.Requested != 2<<30 || e.OOM.Limit != 16<<30 {
		t.Errorf("oom event %+v", e)
	}
	if e := kinds["verdict"]; e.Verdict == nil || e.Verdict.Mark != "✗" || e.Verdict.Label != "After cleanup" || !strings.Contains(e.Message, "losses") {
		t.Errorf("verdict event %+v", e)
	}
	f := kinds["forecast"].Forecast
	if f == nil || f.Unit != "steps" || f.At != 26 || f.In < 85 || f.In > 87 || f.Low > f.In || f.High < f.In ||
		!strings.Contains(f.Limit, "set_per_process_memory_fraction") {
		t.Errorf("forecast event %+v %+v", kinds["forecast"], f)
	}
	if code := r.stop(); code != 0 {
		t.Errorf("record exited %d:\n%s", code, r.stderr)
	}
}

// `gputop serve --alert`: a command still running past --alert-timeout is
// killed, one that fails is logged with its exit status and the last line
// of its standard error; neither holds gputop up.
func TestAlertCommandHangsAndFails(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	cmd := `case "$GPUTOP_EVENT" in oom) exec sleep 60;; *) echo "first line" >&2; echo "curl: (7) no route to host" >&2; exit 3;; esac`
	_, out := startServe(t, dir, sock, "--alert", cmd, "--alert-timeout", "1s")
	a := startRankAgent(t, sock, 4242, 0)
	a.send("%s", oomFrame())
	a.send("%s", endRowHeld())
	out.waitFor(t, "alert verdict (pid 4242 on GPU 0): the alert command failed (exit status 3): curl: (7) no route to host")
	out.waitFor(t, "alert oom (pid 4242 on GPU 0): the alert command was still running after 1s: killed (SIGKILL to its process group)")
}

// The TUI with --alert: an OOM runs the command, and the status line says
// so.
func TestAlertInTerminal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	events := filepath.Join(dir, "events")
	tm := startTerm(t, 160, 40, "--source", "agent", "--socket", sock, "--alert", "cat >> "+events)
	waitFile(t, sock)
	a := startRankAgent(t, sock, 4242, 0)
	a.send("%s", oomFrame())
	tm.waitFor("alert oom (pid 4242 on GPU 0): ran the alert command")
	if evs := readEvents(t, events, 1); len(evs) != 1 || evs[0].Event != "oom" {
		t.Fatalf("events %+v", evs)
	}
}

// `gputop run --alert`: CMD's OOM, right before it exits, still runs the
// command: gputop looks once more as it ends and waits for it.
func TestAlertRun(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to play CMD's agent:", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	events := filepath.Join(dir, "events")
	script := fmt.Sprintf(`
import os, socket, time
s = socket.socket(socket.AF_UNIX)
for _ in range(200):
    try:
        s.connect(%q); break
    except OSError:
        time.sleep(0.05)
t = time.time_ns()
s.sendall(('{"type":"hello","v":1,"pid":%%d,"argv":["train.py"],"devices":[{"index":0,"uuid":"GPU-run","name":"Run GPU","total":85899345920}],"t":%%d}\n' %% (os.getpid(), t)
  + '{"type":"oom","t":%%d,"dev":0,"requested":2147483648,"allocated":1,"reserved":1,"peak":1}\n' %% (t + 1)
  + '{"type":"bye","t":%%d}\n' %% (t + 2)).encode())
s.recv(1)
`, sock)
	c := exec.Command(binary, "run", "--no-tui", "--source", "agent", "--socket", sock, "--alert", "cat >> "+events, "--", py, "-c", script)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	evs := readEvents(t, events, 1)
	if len(evs) != 1 || evs[0].Event != "oom" || evs[0].OOM == nil || evs[0].OOM.Requested != 2<<30 {
		t.Fatalf("events %+v\n%s", evs, out)
	}
	if !strings.Contains(string(out), "ran the alert command") {
		t.Errorf("run's output does not say the command ran:\n%s", out)
	}
}
