// Package e2e drives the real gputop binary: in a real terminal (tmux) for
// the TUI, and as a plain command for the CLI.
package e2e

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gputop-e2e-")
	if err != nil {
		panic(err)
	}
	tmuxLog, err := guardTmux(dir)
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "gputop")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building gputop:", err)
		os.Exit(1)
	}
	code := m.Run()
	if b, _ := os.ReadFile(tmuxLog); len(b) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: tmux was run on the default server (no -L or -S):\n%s", b)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

const mib = 1 << 20

// base is a fixed start time for synthetic recordings.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano()

// writeRecording writes a real recording with the real writer: one device at
// a steady 1234 MiB for 20 s at 1 kHz with a 5 ms spike at 10 s, and one
// row.
func writeRecording(t *testing.T, path string) {
	t.Helper()
	in, done := testRecording(t, path, 1000, "GPU-test", 80<<30)
	for i := 0; i < 20_000; i++ {
		used := uint64(1234 * mib)
		if i >= 10_000 && i < 10_005 {
			used = 5234 * mib
		}
		in.NVML(0, base+int64(i)*int64(time.Millisecond), used, 512*mib)
	}
	in.TakeSnapshot("Recorded start", 0, base+int64(time.Second), "key", nil)
	done()
}

type term struct {
	t      *testing.T
	server string // its own tmux server's socket (tmux_test.go)
	name   string
	pid    int
}

func startTerm(t *testing.T, w, h int, args ...string) *term {
	t.Helper()
	return startTermCmd(t, w, h, append([]string{binary}, args...)...)
}

// startTermCmd runs a command line in a new tmux session, on a tmux server
// of its own, whose pane process is gputop (env execs it).
func startTermCmd(t *testing.T, w, h int, argv ...string) *term {
	t.Helper()
	tm := &term{t: t, server: newTmuxServer(), name: "gputop-e2e"}
	cmd := append([]string{"new-session", "-d", "-s", tm.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "--"}, argv...)
	if out, err := tm.tmux(cmd...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	out, _ := tm.tmux("display-message", "-p", "-t", tm.name, "#{pane_pid}").Output()
	fmt.Sscan(string(out), &tm.pid)
	// the session runs gputop itself, so its pane pid is gputop's; ending
	// the server closes the terminal, which makes gputop write --csv and
	// exit: wait for that before the test's temporary directory is removed
	t.Cleanup(func() {
		tm.tmux("kill-server").Run()
		os.Remove(tm.server) // tmux leaves its socket behind
		tm.waitExit()
	})
	return tm
}

// waitExit waits until gputop has exited.
func (tm *term) waitExit() {
	deadline := time.Now().Add(10 * time.Second)
	for tm.pid > 0 && time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", tm.pid)); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tm *term) screen() string {
	out, _ := tm.tmux("capture-pane", "-p", "-t", tm.name).Output()
	return string(out)
}

// waitFor polls the screen until it contains s (or any of more).
func (tm *term) waitFor(s string, more ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var scr string
	for time.Now().Before(deadline) {
		scr = tm.screen()
		for _, w := range append([]string{s}, more...) {
			if strings.Contains(scr, w) {
				return scr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("screen never showed %q; last screen:\n%s", append([]string{s}, more...), scr)
	return ""
}

func (tm *term) keys(k ...string) {
	tm.t.Helper()
	args := append([]string{"send-keys", "-t", tm.name}, k...)
	if out, err := tm.tmux(args...).CombinedOutput(); err != nil {
		tm.t.Fatalf("send-keys: %v: %s", err, out)
	}
}

// editedRecording writes writeRecording's file at path with each of its
// lines replaced by what edit makes of it (the line itself, and any more).
func editedRecording(t *testing.T, path string, edit func(line string) []string) {
	t.Helper()
	writeRecording(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		out = append(out, edit(l)...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never written", path)
}

// The flow on a recording: s takes no snapshot in a replay and
// says why (nothing is added); e writes the recorded row to the CSV with
// the recording's NVML value.
func TestSnapshotAndExportInTerminal(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	out := filepath.Join(dir, "summary.csv")
	tm := startTerm(t, 160, 50, "--replay", rec, "--csv", out)
	tm.waitFor("Test GPU")
	scr := tm.waitFor("Recorded start  0:00:01.0") // replay reached the recorded row
	if !strings.Contains(scr, "1234.00") {
		t.Fatalf("row with NVML used 1234.00 MiB not on screen:\n%s", scr)
	}
	tm.keys("s")
	tm.waitFor("a replay takes no snapshot")
	tm.keys("Enter")
	tm.keys("e")
	waitFile(t, out)
	tm.waitFor("wrote " + out)
	recs := readCSV(t, out)
	if got := strings.Join(recs[0][:7], ","); got != "label,time,device,allocated_mb,reserved_mb,peak_mb,nvml_used_mb" {
		t.Fatalf("header %q", got)
	}
	if len(recs) != 2 || recs[1][0] != "Recorded start" {
		t.Fatalf("want the recorded row alone, got %v", recs)
	}
	row := recs[1]
	if row[2] != "0" || row[6] != "1234.00" {
		t.Fatalf("row %v: want device 0 and nvml_used_mb 1234.00", row)
	}
	if row[3] != "" || row[4] != "" || row[5] != "" {
		t.Fatalf("allocator columns must be empty without an agent: %v", row)
	}
	tm.keys("q")
	tm.waitExit()
}

func TestTinyTerminal(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	tm := startTerm(t, 20, 5, "--replay", rec)
	tm.waitFor("too small")
	tm.keys("s") // keys on a tiny screen must not crash it
	time.Sleep(300 * time.Millisecond)
	if !strings.Contains(tm.screen(), "too small") {
		t.Fatalf("tiny screen lost its notice:\n%s", tm.screen())
	}
}

func TestCorruptRecordingInTerminal(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	data, _ := os.ReadFile(rec)
	cut := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	bad := append(append([]byte{}, data[:cut]...), []byte("{not json\n")...)
	os.WriteFile(rec, bad, 0o644)
	tm := startTerm(t, 160, 50, "--replay", rec)
	scr := tm.waitFor(fmt.Sprintf("byte %d", cut))
	if !strings.Contains(scr, "Test GPU") {
		t.Fatalf("readable part not shown:\n%s", scr)
	}
}

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GPUTOP_SOCKET="+filepath.Join(t.TempDir(), "s.sock"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestNoDriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	out, code := run(t)
	if code != 1 || !strings.Contains(out, "libnvidia-ml.so") || !strings.Contains(out, "--demo") || strings.Contains(out, "goroutine") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func TestUnknownFlag(t *testing.T) {
	out, code := run(t, "--no-such-flag")
	if code != 2 || !strings.Contains(out, "Usage:") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	if _, code := run(t, "record", "--bogus"); code != 2 {
		t.Fatalf("record --bogus: exit %d", code)
	}
}

func TestExportCLI(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	out := filepath.Join(dir, "s.csv")
	if msg, code := run(t, "export", rec, "--csv", out); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	recs := readCSV(t, out)
	if len(recs) != 2 || recs[1][0] != "Recorded start" || recs[1][6] != "1234.00" {
		t.Fatalf("%v", recs)
	}
	// a recorder killed mid-line: warning naming the file and offset, still exported
	data, _ := os.ReadFile(rec)
	os.WriteFile(rec, data[:len(data)-3], 0o644)
	msg, code := run(t, "export", rec, "--csv", out)
	if code != 0 || !strings.Contains(msg, rec) || !strings.Contains(msg, "byte") {
		t.Fatalf("truncated: exit %d: %s", code, msg)
	}
	// unwritable CSV path: clear error naming it
	bad := filepath.Join(dir, "missing", "x.csv")
	msg, code = run(t, "export", rec, "--csv", bad)
	if code != 1 || !strings.Contains(msg, bad) {
		t.Fatalf("unwritable: exit %d: %s", code, msg)
	}
}

// Closing the terminal (SIGHUP) ends gputop like q: --csv is still written.
func TestClosedTerminalWritesCSV(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	out := filepath.Join(dir, "summary.csv")
	tm := startTerm(t, 160, 50, "--replay", rec, "--csv", out)
	tm.waitFor("Recorded start  0:00:01.0")
	if err := tm.tmux("kill-session", "-t", tm.name).Run(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, out)
	recs := readCSV(t, out)
	if len(recs) != 2 || recs[1][0] != "Recorded start" {
		t.Fatalf("%v", recs)
	}
}

// A second gputop on the socket of a running one says so and exits; the
// first keeps recording and ends cleanly on SIGINT.
func TestSecondRecorderOnTheSameSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	first := exec.Command(binary, "record", "--source", "agent", "--socket", sock, "-o", filepath.Join(dir, "a.gputop"))
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	waitFile(t, sock)
	out, code := run(t, "record", "--source", "agent", "--socket", sock, "-o", filepath.Join(dir, "b.gputop"))
	if code != 1 || !strings.Contains(out, "another gputop is listening on "+sock) {
		t.Fatalf("second recorder: exit %d: %s", code, out)
	}
	first.Process.Signal(os.Interrupt)
	if err := first.Wait(); err != nil {
		t.Fatalf("first recorder: %v: %s", err, firstErr.String())
	}
	if !strings.Contains(firstErr.String(), "0 rows") {
		t.Fatalf("first recorder's summary: %s", firstErr.String())
	}
}

// spikeColumns counts the separate runs of chart columns whose highest
// braille dot is in the upper half of the plot: one run per spike.
func spikeColumns(screen string) int {
	lines := strings.Split(screen, "\n")
	var plot [][]rune
	for _, l := range lines {
		r := []rune(l)
		for x, c := range r {
			if c == '│' && x < 12 { // the y axis
				plot = append(plot, r[x+1:])
				break
			}
		}
	}
	if len(plot) == 0 {
		return 0
	}
	half := len(plot) / 2
	runs, in := 0, false
	for x := 0; ; x++ {
		any, high := false, false
		for y, r := range plot {
			if x < len(r) {
				any = true
				if r[x] > 0x2800 && r[x] <= 0x28FF && y < half {
					high = true
				}
			}
		}
		if !any {
			return runs
		}
		if high && !in {
			runs++
		}
		in = high
	}
}

// The H200 recording of 20 allocations of 4 GiB held 5 ms each (made by
// bench/workloads/spikes.py beside gputop record): every spike is on the
// chart, seen from the whole run and from a 10 s window.
func TestRealSpikesVisibleOnTheChart(t *testing.T) {
	tm := startTerm(t, 160, 50, "--replay", "../testdata/recordings/h200-spikes.gputop")
	tm.waitFor("NVIDIA H200")
	tm.keys("End")
	tm.keys("-l", "--", "--") // two "-": zoom out to the whole run
	tm.waitFor("window whole run")
	time.Sleep(300 * time.Millisecond)
	scr := tm.screen()
	if n := spikeColumns(scr); n != 20 {
		t.Fatalf("whole run: %d spikes on the chart, want 20:\n%s", n, scr)
	}
	// the job has exited by the end of the recording; its name stays
	if !strings.Contains(scr, "1290  python3") {
		t.Fatalf("process 1290 not named python3 at the end:\n%s", scr)
	}
	tm.keys("+", "+") // whole run -> 10 s
	tm.waitFor("window 10s")
	time.Sleep(300 * time.Millisecond)
	if n := spikeColumns(tm.screen()); n != 20 {
		t.Fatalf("10 s window: %d spikes on the chart, want 20:\n%s", n, tm.screen())
	}
}

// The H200 recording of a real CUDA out-of-memory error (bench/oom_check.py
// beside gputop record --source agent: 1 GiB held, then twice the GPU asked
// for): the replayed TUI and `gputop export` both say what was asked, what
// was free, and that the request alone exceeds the GPU.
func TestRealOOMExplained(t *testing.T) {
	const rec = "../testdata/recordings/h200-oom.gputop"
	want := []string{"asked for 279.6 GiB, 138.2 GiB free on the GPU (CUDA)",
		"That is more than the whole GPU (139.8 GiB)"}
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor("NVIDIA H200")
	scr := tm.waitFor("more than the whole GPU")
	for _, w := range want {
		if !strings.Contains(scr, w) {
			t.Fatalf("screen lacks %q:\n%s", w, scr)
		}
	}
	row := exportOOM(t, rec, append(want, "GPU 0 (NVIDIA H200): ✗ OOM at 2026-11-30T07:14:42.705Z in pid 556")...)
	if row["allocated_bytes"] != "1073741824" || row["oom_requested_bytes"] != "300219891712" {
		t.Fatalf("CSV row: %v", row)
	}
}

// The H200 recording of the usual OOM (bench/oom_check.py's fill scenario,
// gputop record --source all): 1 GiB tensors until the GPU is full, within
// tens of milliseconds. The OOM row's NVML figures are those of the OOM's
// instant (the GPU full), not the last batch of NVML samples before it (the
// GPU nearly empty), and export names live tensors as the cause.
func TestRealFillOOMRow(t *testing.T) {
	row := exportOOM(t, "../testdata/recordings/h200-oom-fill.gputop",
		"asked for 1.00 GiB, 201.1 MiB free on the GPU (CUDA)", "Live tensors fill the GPU",
		"torch held 139.0 GiB in tensors", "on the whole GPU 618.8 MiB outside its cache")
	if row["reserved_mb"] != "142336.00" || row["nvml_used_mb"] != "142954.81" || row["nvml_peak_mb"] != "142954.81" {
		t.Fatalf("CSV row: %v", row)
	}
}

// Two H200 recordings with the observer's limit (bench/oom_check.py, 08:56):
// the fill OOM, whose limit is torch's total of the device (139.8 GiB, less
// than NVML's 140.4 GiB: no memory fraction), and an OOM past
// set_per_process_memory_fraction(0.05), which must be blamed on it.
func TestRealOOMLimit(t *testing.T) {
	row := exportOOM(t, "../testdata/recordings/h200-oom-fill-limit.gputop",
		"asked for 1.00 GiB, 201.1 MiB free on the GPU (CUDA)", "Live tensors fill the GPU")
	if row["oom_limit_bytes"] != "150109880320" || row["allocated_bytes"] != "149250113536" {
		t.Fatalf("fill CSV row: %v", row)
	}
	row = exportOOM(t, "../testdata/recordings/h200-oom-fraction.gputop",
		"asked for 8.00 GiB, 138.2 GiB free on the GPU (CUDA)",
		"torch may use only 6.99 GiB of this GPU's 139.8 GiB (torch.cuda.set_per_process_memory_fraction)")
	if row["oom_limit_bytes"] != "7505494016" || row["oom_requested_bytes"] != "8589934592" {
		t.Fatalf("fraction CSV row: %v", row)
	}
}

// exportOOM runs gputop export on a recording of one OOM: its output must
// hold every string in want, and its CSV one row, the OOM, returned by
// column name.
func exportOOM(t *testing.T, rec string, want ...string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "oom.csv")
	msg, code := run(t, "export", rec, "--csv", out)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("export output lacks %q:\n%s", w, msg)
		}
	}
	recs := readCSV(t, out)
	if len(recs) != 2 {
		t.Fatalf("CSV rows: %v", recs)
	}
	row := map[string]string{}
	for i, h := range recs[0] {
		row[h] = recs[1][i]
	}
	if row["label"] != "OOM" {
		t.Fatalf("CSV row: %v", row)
	}
	return row
}
