package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits (at most 10 s) until the output holds what.
func (l *lockedBuffer) waitFor(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(l.String(), what) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("output never showed %q:\n%q", what, l.String())
}

// recorder is a running `gputop record`.
type recorder struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
}

func startRecord(t *testing.T, args ...string) *recorder {
	t.Helper()
	r := &recorder{t: t, cmd: exec.Command(binary, append([]string{"record"}, args...)...), stderr: &lockedBuffer{}}
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// stop ends the recorder as Ctrl-C does and returns its exit status.
func (r *recorder) stop() int {
	r.cmd.Process.Signal(os.Interrupt)
	err := r.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return 0
}

// agentSession plays one agent over the real socket: hello as pid, n
// samples 100 ms apart (sample time), bye; it returns once gputop has
// closed the connection, i.e. has taken in every frame.
func agentSession(t *testing.T, sock string, pid, n int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now().UnixNano()
	w := bufio.NewWriterSize(c, 64<<10)
	fmt.Fprintf(w, `{"type":"hello","v":1,"pid":%d,"argv":["e2e-agent"],"torch":"2.11.0","devices":[{"index":0,"uuid":"GPU-e2e","name":"E2E GPU","total":85899345920}],"t":%d}`+"\n", pid, t0)
	for i := range n {
		fmt.Fprintf(w, `{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d}`+"\n", t0+int64(i+1)*100e6, i, 2*i, 3*i)
	}
	fmt.Fprintf(w, `{"type":"bye","t":%d}`+"\n", t0+int64(n+1)*100e6)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Fatal("gputop answered a bye instead of closing")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("gputop did not close the connection after bye")
	}
}

// A recorder that cannot start (no NVIDIA driver, a busy socket, a socket
// directory of another user) leaves an existing recording byte for byte,
// --force or not; a recorder that can start refuses to replace it without
// --force, and replaces it with.
func TestRecordKeepsExistingRecording(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	orig, _ := os.ReadFile(rec)
	same := func(what, msg string) {
		t.Helper()
		if got, _ := os.ReadFile(rec); !bytes.Equal(got, orig) {
			t.Fatalf("%s: the recording became %d bytes (was %d): %s", what, len(got), len(orig), msg)
		}
	}

	busy := filepath.Join(dir, "busy.sock")
	first := startRecord(t, "--source", "agent", "--socket", busy, "-o", filepath.Join(dir, "first.gputop"))
	waitFile(t, busy)
	// the default socket directory owned by another user
	rt := filepath.Join(dir, "rt")
	os.MkdirAll(filepath.Join(rt, "gputop"), 0o700)
	if err := os.Chown(filepath.Join(rt, "gputop"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	type start struct {
		env  []string
		args []string
	}
	var cases []start
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		cases = append(cases, start{nil, []string{"--source", "nvml"}}) // no driver on this machine
	}
	cases = append(cases,
		start{nil, []string{"--source", "agent", "--socket", busy}},
		start{[]string{"GPUTOP_SOCKET=", "XDG_RUNTIME_DIR=" + rt}, []string{"--source", "agent"}})
	for _, c := range cases {
		for _, force := range []bool{false, true} {
			// --duration: a recorder that starts after all ends, and fails the test
			args := append([]string{"record", "-o", rec, "--duration", "5s"}, c.args...)
			if force {
				args = append(args, "--force")
			}
			cmd := exec.Command(binary, args...)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("%v %v: %v: %s", c.env, args, err, out)
			}
			same(strings.Join(args, " "), string(out))
			if force && !strings.Contains(string(out), "owned by uid 65534") && c.env != nil {
				t.Fatalf("socket directory of another user: %s", out)
			}
		}
	}
	if code := first.stop(); code != 0 {
		t.Fatalf("first recorder: exit %d: %s", code, first.stderr.String())
	}

	ok := []string{"record", "-o", rec, "--source", "agent", "--socket", filepath.Join(dir, "ok.sock"), "--duration", "200ms"}
	msg, code := run(t, ok...)
	if code != 1 || !strings.Contains(msg, rec) || !strings.Contains(msg, "--force") {
		t.Fatalf("without --force: exit %d: %s", code, msg)
	}
	same("record without --force", msg)
	msg, code = run(t, append(ok, "--force")...)
	if code != 0 {
		t.Fatalf("--force: exit %d: %s", code, msg)
	}
	info, err := recording.Load(rec, store.New(store.DefaultOptions()))
	if err != nil || info.Header.Tool == "test" {
		t.Fatalf("--force did not write a new recording: %+v %v", info.Header, err)
	}
}

// Every event is printed, however many: 250 agents attach and detach one
// after the other (500 lines; the store keeps only its last 200).
func TestRecordPrintsEveryEvent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", filepath.Join(dir, "run.gputop"))
	waitFile(t, sock)
	const n = 250
	for i := range n {
		agentSession(t, sock, 20000+i, 0)
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	out := r.stderr.String()
	for i := range n {
		for _, ev := range []string{"attached", "detached"} {
			if want := fmt.Sprintf("pid %d (e2e-agent): %s", 20000+i, ev); !strings.Contains(out, want) {
				t.Fatalf("%q not printed (event %d of %d):\n%s", want, 2*i+1, 2*n, out)
			}
		}
	}
}

// recordToFIFO starts a recorder writing to a FIFO and a reader of it that
// waits for release before it reads; the reader's bytes come on the channel.
func recordToFIFO(t *testing.T, dir, sock string, release <-chan struct{}) (*recorder, <-chan []byte) {
	fifo := filepath.Join(dir, "rec.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := stalledReader(fifo, release)
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", fifo)
	waitFile(t, sock)
	return r, got
}

// agentSamples counts the agent samples in a recording's samples lines.
func agentSamples(t *testing.T, data []byte) int {
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		var f struct {
			Type string  `json:"type"`
			DT   []int64 `json:"dt"`
		}
		if json.Unmarshal(l, &f) == nil && f.Type == "samples" {
			n += len(f.DT)
		}
	}
	return n
}

// A FIFO as output that is read promptly: everything arrives, exit 0.
func TestRecordToFIFO(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	close(release)
	r, got := recordToFIFO(t, dir, filepath.Join(dir, "s.sock"), release)
	const n = 500
	agentSession(t, filepath.Join(dir, "s.sock"), 31000, n)
	code := r.stop()
	data := <-got
	if code != 0 || strings.Contains(r.stderr.String(), "dropped") {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	if k := agentSamples(t, data); k != n {
		t.Fatalf("%d agent samples arrived through the FIFO, want %d", k, n)
	}
	if _, err := recording.LoadReader("fifo", bytes.NewReader(data), store.New(store.DefaultOptions())); err != nil {
		t.Fatal(err)
	}
}

// `record -o -` writes the recording to standard output (a pipe here).
func TestRecordToStdout(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	r := &recorder{t: t, cmd: exec.Command(binary, "record", "-o", "-", "--source", "agent", "--socket", sock), stderr: &lockedBuffer{}}
	var out bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &out, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, sock)
	agentSession(t, sock, 33000, 50)
	if code := r.stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	if k := agentSamples(t, out.Bytes()); k != 50 {
		t.Fatalf("%d agent samples on stdout, want 50", k)
	}
	if _, err := recording.LoadReader("stdout", bytes.NewReader(out.Bytes()), store.New(store.DefaultOptions())); err != nil {
		t.Fatal(err)
	}
}

var droppedTotal = regexp.MustCompile(`(\d+) agent samples`)

// A FIFO whose reader stalls: the recorder drops lines instead of growing
// without bound, says so while it records and at the end (exit 1), and
// writes the count into the recording, where export and the replayed TUI
// report it. What was
// written plus what was dropped is every sample sent.
func TestRecordSlowFIFODrops(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	release := make(chan struct{})
	r, got := recordToFIFO(t, dir, sock, release)
	const n = 60_000 // two samples a line: more lines than the queue and a chunk being written hold
	agentSession(t, sock, 32000, n)
	close(release)
	code := r.stop()
	data := <-got
	out := r.stderr.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	m := droppedTotal.FindStringSubmatch(last)
	if code != 1 || m == nil || !strings.Contains(last, "dropped") {
		t.Fatalf("exit %d, last line %q:\n%s", code, last, out)
	}
	dropped, _ := strconv.Atoi(m[1])
	written := agentSamples(t, data)
	if dropped == 0 || written+dropped != n {
		t.Fatalf("%d written + %d dropped, want %d sent:\n%s", written, dropped, n, out)
	}
	t.Logf("%d of %d agent samples written, %d dropped; the recorder said:\n%s", written, n, dropped, out)
	st := store.New(store.DefaultOptions())
	info, err := recording.LoadReader("fifo", bytes.NewReader(data), st)
	if err != nil || info.Dropped.AgentSamples != uint64(dropped) {
		t.Fatalf("the recording says %d agent samples dropped, the recorder %d: %v", info.Dropped.AgentSamples, dropped, err)
	}
	rec := filepath.Join(dir, "saved.gputop")
	os.WriteFile(rec, data, 0o644)
	msg, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	note := fmt.Sprintf("the recorder dropped %d agent samples", dropped)
	if code != 0 || !strings.Contains(msg, note) {
		t.Fatalf("export: exit %d: %s", code, msg)
	}
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor(note)
}

// A frame dropped because its line would be over a recording line's limit
// (the recorder's too_long count) is reported as too long, with the limit,
// not as an output that did not keep up.
func TestExportSaysFrameTooLong(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	editedRecording(t, rec, func(l string) []string {
		if strings.Contains(l, `"type":"snapshot"`) {
			return []string{l, fmt.Sprintf(`{"type":"dropped","t":%d,"too_long":2}`, base+2e9)}
		}
		return []string{l}
	})
	msg, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	want := "the recorder dropped 2 frames longer than a recording line may be (4 MiB)"
	if code != 0 || !strings.Contains(msg, want) || strings.Contains(msg, "keep up") {
		t.Fatalf("export: exit %d: %q; want %q", code, msg, want)
	}
}
