package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// An output whose reader opened it and then stopped reading: gputop told to
// stop gives the writer recording.CloseWait, counts what is still queued as
// dropped, says so, and exits 1. These tests wait that long plus a margin
// for a loaded machine; without the bound the commands never end.
const stallMargin = 10 * time.Second

// stalledReader opens fifo for reading (once a writer has opened it, as a
// reader does) and reads nothing until release; then it reads to the end.
func stalledReader(fifo string, release <-chan struct{}) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		<-release
		var b bytes.Buffer
		b.ReadFrom(f)
		got <- b.Bytes()
	}()
	return got
}

// interruptStalled sends SIGINT to a command whose output has stalled and
// returns its exit status and how long it took to end.
func interruptStalled(t *testing.T, cmd *exec.Cmd) (int, time.Duration) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t0 := time.Now()
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		took := time.Since(t0)
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), took
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, took
	case <-time.After(recording.CloseWait + stallMargin):
		t.Fatalf("still running %v after SIGINT, its output stalled", recording.CloseWait+stallMargin)
	}
	return 0, 0
}

// stalledSummary checks what a command said when it gave up on its output
// and returns the dropped agent samples it counted.
func stalledSummary(t *testing.T, stderr string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	m := droppedTotal.FindStringSubmatch(last)
	if !strings.Contains(stderr, "stopped waiting") || m == nil || !strings.Contains(last, "the file ends where the output stopped") {
		t.Fatalf("no summary of what was left:\n%s", stderr)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// checkStalledRecording holds what reached the reader to the count: it
// loads (up to a line cut off where the output stopped), and its samples
// plus those the summary says were dropped are every sample sent.
func checkStalledRecording(t *testing.T, data []byte, dropped, sent int) {
	t.Helper()
	if _, err := recording.LoadReader("fifo", bytes.NewReader(data), store.New(store.DefaultOptions())); err != nil {
		t.Fatalf("what reached the reader does not load: %v", err)
	}
	if written := agentSamples(t, data); dropped == 0 || written+dropped != sent {
		t.Fatalf("%d written + %d dropped, want %d sent", written, dropped, sent)
	}
}

// gputop record -o FIFO whose reader stalls ends on the first Ctrl-C.
func TestRecordStalledFIFOInterrupted(t *testing.T) {
	dir := t.TempDir()
	sock, fifo := filepath.Join(dir, "s.sock"), filepath.Join(dir, "rec.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	got := stalledReader(fifo, release)
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", fifo)
	waitFile(t, sock)
	const n = 60_000
	agentSession(t, sock, 35000, n)
	code, took := interruptStalled(t, r.cmd)
	out := r.stderr.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	dropped := stalledSummary(t, out)
	close(release)
	checkStalledRecording(t, <-got, dropped, n)
	t.Logf("ended %v after SIGINT; %d of %d samples dropped; it said:\n%s", took.Round(time.Millisecond), dropped, n, out)
}

// gputop serve --stdio with standard output redirected to a FIFO (as a
// shell does: a blocking descriptor) whose reader stalls ends on the first
// Ctrl-C with the summary on stderr, though stdin is still open.
func TestServeStdioStalledFIFOInterrupted(t *testing.T) {
	dir := t.TempDir()
	sock, fifo := filepath.Join(dir, "s.sock"), filepath.Join(dir, "out.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	got := stalledReader(fifo, release)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	cmd := exec.Command("sh", "-c", `exec "$0" serve --stdio --source agent --socket "$1" >"$2"`, binary, sock, fifo)
	stderr := &lockedBuffer{}
	cmd.Stdin, cmd.Stderr = inR, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFile(t, sock)
	const n = 60_000
	agentSession(t, sock, 36000, n)
	code, took := interruptStalled(t, cmd)
	out := stderr.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	dropped := stalledSummary(t, out)
	if !strings.Contains(out, "standard output") {
		t.Fatalf("the summary does not name standard output:\n%s", out)
	}
	close(release)
	checkStalledRecording(t, <-got, dropped, n)
	t.Logf("ended %v after SIGINT; it said:\n%s", took.Round(time.Millisecond), out)
}

// The TUI with --record FIFO whose reader stalls, started from a shell in
// a real terminal: q gives the terminal back to the shell (its prompt
// comes back, the TUI's screen is gone), --csv is written, the recorder's
// summary is printed and the exit status is 1.
func TestTUIRecordStalledFIFOQuit(t *testing.T) {
	dir := t.TempDir()
	sock, fifo, csvPath := filepath.Join(dir, "s.sock"), filepath.Join(dir, "rec.fifo"), filepath.Join(dir, "out.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	stalledReader(fifo, release)
	const prompt = "stalltest$" // the terminal's copy ends here: tmux trims the space after it
	tm := startTermCmd(t, 160, 50, "env", "PS1="+prompt+" ", "sh", "-i")
	tm.waitFor(prompt)
	tm.keys("-l", fmt.Sprintf(`%s --source agent --socket %s --record %s --csv %s; echo "gputop ""exited $?"`, binary, sock, fifo, csvPath))
	tm.keys("Enter")
	tm.waitFor("agents: listening")
	agentSession(t, sock, 37000, 60_000)
	tm.waitFor("37000")
	tm.keys("q")
	deadline := time.Now().Add(recording.CloseWait + stallMargin)
	var scr string
	for time.Now().Before(deadline) {
		scr = tm.screen()
		if strings.Contains(scr, "gputop exited ") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(scr, "gputop exited 1") {
		t.Fatalf("the shell never got the terminal back with exit status 1 after q; screen:\n%s", scr)
	}
	lines := strings.Split(strings.TrimRight(scr, "\n "), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != prompt {
		t.Fatalf("the shell's prompt is not the last line; screen:\n%s", scr)
	}
	if strings.Contains(scr, "agents: listening") || !strings.Contains(scr, "stopped waiting") {
		t.Fatalf("the TUI's screen is still there, or the recorder's summary is missing; screen:\n%s", scr)
	}
	if recs := readCSV(t, csvPath); len(recs) < 1 || recs[0][0] != "label" {
		t.Fatalf("--csv: %v", recs)
	}
	t.Logf("the terminal after q:\n%s", strings.TrimRight(scr, "\n"))
}
