package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/printable"
)

// What a hostile agent puts in its hello: an SGR colour (a 256-colour
// index the TUI never uses), an OSC that sets the window title, a DCS and a
// CSI that clears the screen.
const (
	injSGR   = "\x1b[38;5;201m"
	injTitle = "pwned-title"
	injOSC   = "\x1b]0;" + injTitle + "\x07"
	injDCS   = "\x1bPqpwned-dcs\x1b\\"
	injCSI   = "\x1b[2J"
)

var (
	hostileArgv0 = "pre" + injSGR + "A" + injOSC + "B" + injDCS + "C" + injCSI + "D.py"
	hostileTorch = "2.5" + injSGR + injOSC + "+cu124"
	hostileName  = "Fake" + injOSC + injDCS + "GPU" + injSGR
)

// agentConn is a training process's end of the real socket, speaking raw
// frames.
type agentConn struct {
	t *testing.T
	c net.Conn
}

func dialAgent(t *testing.T, sock string) *agentConn {
	t.Helper()
	waitFile(t, sock)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &agentConn{t, c}
}

func (a *agentConn) send(frame map[string]any) {
	a.t.Helper()
	if _, ok := frame["t"]; !ok {
		frame["t"] = time.Now().UnixNano()
	}
	b, err := json.Marshal(frame)
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.c.Write(append(b, '\n')); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agentConn) hello(argv0, torch, devName string) {
	a.send(map[string]any{"type": "hello", "v": 1, "pid": os.Getpid(), "host": "h" + injOSC,
		"argv": []string{argv0, "--epochs" + injSGR, "10"}, "torch": torch, "python": "3.12" + injCSI,
		"devices": []map[string]any{{"index": 0, "uuid": "GPU-e2e-text", "name": devName, "total": 80 << 30}}})
}

func (a *agentConn) mark(label string, allocated uint64) {
	a.send(map[string]any{"type": "mark", "label": label, "kind": "snapshot",
		"devs": []map[string]any{{"dev": 0, "allocated": allocated, "reserved": allocated + mib, "peak": allocated}}})
}

// `gputop record` prints the agent's events on stderr and `gputop export`
// the recording's findings on stdout: neither passes an escape sequence on.
func TestHostileHelloRecordAndExport(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	rec := filepath.Join(dir, "run.gputop")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", rec)
	a := dialAgent(t, sock)
	a.hello(hostileArgv0, hostileTorch, hostileName)
	a.mark("Training"+injOSC+" start", 100*mib)
	a.mark("After cleanup", 100*mib) // an end row: a findings line naming the device
	a.send(map[string]any{"type": "bye"})
	r.stderr.waitFor(t, "detached")
	if code := r.stop(); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, r.stderr.String())
	}
	log := r.stderr.String()
	if strings.ContainsRune(log, 0x1b) || strings.ContainsRune(log, 0x07) {
		t.Fatalf("record's stderr holds escape bytes:\n%q", log)
	}
	// the torch version is printed, made printable
	if want := "torch 2.5\uFFFD\uFFFD+cu124"; !strings.Contains(log, want) {
		t.Fatalf("record's stderr lacks %q:\n%q", want, log)
	}

	out, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	if code != 0 {
		t.Fatalf("export: exit %d: %q", code, out)
	}
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) {
		t.Fatalf("export's output holds escape bytes:\n%q", out)
	}
	if want := "GPU 0 (Fake\uFFFD\uFFFDGPU\uFFFD)"; !strings.Contains(out, want) {
		t.Fatalf("export's findings lack the device %q:\n%q", want, out)
	}
}

// A recording made by hand (or by another program) with a hostile device
// name and label: export's findings print both made printable.
func TestHostileRecordingExport(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	name, _ := json.Marshal(hostileName) // ESC is \u001b in the JSON, a raw ESC once loaded
	label, _ := json.Marshal("After" + injOSC + " cleanup")
	editedRecording(t, rec, func(l string) []string {
		out := []string{strings.Replace(l, `"name":"Test GPU"`, `"name":`+string(name), 1)}
		if strings.Contains(l, `"type":"snapshot"`) { // a second row, an end row: a verdict to report
			out = append(out, strings.Replace(l, `"label":"Recorded start"`, `"label":`+string(label)+`,"end":true`, 1))
		}
		return out
	})
	msg, code := run(t, "export", rec, "--csv", filepath.Join(dir, "s.csv"))
	if code != 0 {
		t.Fatalf("export: exit %d: %q", code, msg)
	}
	if strings.ContainsRune(msg, 0x1b) || strings.ContainsRune(msg, 0x07) {
		t.Fatalf("export's output holds escape bytes:\n%q", msg)
	}
	for _, want := range []string{"GPU 0 (Fake\uFFFD\uFFFDGPU\uFFFD)", "After\uFFFD cleanup"} {
		if !strings.Contains(msg, want) {
			t.Errorf("export's findings lack %q:\n%q", want, msg)
		}
	}
}

// capture is the pane with its attributes as escape sequences (tmux's own
// rendering of what gputop drew).
func (tm *term) capture() string {
	out, _ := tm.tmux("capture-pane", "-p", "-e", "-t", tm.name).Output()
	return string(out)
}

func (tm *term) title() string {
	out, _ := tm.tmux("display-message", "-p", "-t", tm.name, "#{pane_title}").Output()
	return strings.TrimSuffix(string(out), "\n")
}

// In the TUI, argv[0] (process pane), the torch version (status line) and
// the device name (header) are drawn with their sequences replaced: the
// pane holds none of the injected colour, title or DCS, and the window
// title stays gputop's.
func TestHostileHelloInTerminal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock)
	a := dialAgent(t, sock)
	a.hello(hostileArgv0, hostileTorch, hostileName)
	// the process pane's row, the header's device and the status line's
	// attach message are drawn (old and new code alike begin them so)
	tm.waitFor(fmt.Sprintf("%d  pre", os.Getpid()))
	tm.waitFor("GPU 0  Fake")
	tm.waitFor(fmt.Sprintf("pid %d (pre", os.Getpid()))
	scr := tm.capture()
	for _, bad := range []string{"38;5;201", injTitle, "pwned-dcs", "\x1b]", "\x1bP"} {
		if strings.Contains(scr, bad) {
			t.Errorf("pane holds %q:\n%q", bad, scr)
		}
	}
	if got := tm.title(); got != "gputop" {
		t.Errorf("window title %q, want gputop", got)
	}
	// each field is on screen, its sequences shown as U+FFFD
	for _, want := range []string{"pre\uFFFDA\uFFFDB\uFFFDC\uFFFDD.py", "Fake\uFFFD\uFFFDGPU", "torch 2.5\uFFFD\uFFFD+cu124"} {
		if !strings.Contains(tm.screen(), want) {
			t.Errorf("screen lacks %q:\n%s", want, tm.screen())
		}
	}
}

// A recording whose file name carries a title sequence: the window title
// and the title bar show the name made printable.
func TestReplayFileNameInTitle(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run"+injOSC+".gputop")
	writeRecording(t, rec)
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor("Test GPU")
	if got, want := tm.title(), "gputop: "+printable.Clean(rec); got != want {
		t.Errorf("window title %q, want %q", got, want)
	}
	if !strings.Contains(tm.screen(), "run\uFFFD.gputop") {
		t.Errorf("title bar lacks the file name made printable:\n%s", tm.screen())
	}
}

// cellOf is the screen column (in cells, as tmux placed it) where text
// first appears on the pane: tmux's copy mode finds it and reports its
// cursor there, so no width table of the test's own is involved.
func (tm *term) cellOf(text string) (x, y int) {
	tm.t.Helper()
	run := func(args ...string) string {
		out, err := tm.tmux(args...).CombinedOutput()
		if err != nil {
			tm.t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	run("copy-mode", "-t", tm.name)
	defer run("send-keys", "-t", tm.name, "-X", "cancel")
	run("send-keys", "-t", tm.name, "-X", "top-line")
	run("send-keys", "-t", tm.name, "-X", "start-of-line")
	run("send-keys", "-t", tm.name, "-X", "search-forward-text", text)
	fmt.Sscan(run("display-message", "-p", "-t", tm.name, "#{copy_cursor_x} #{copy_cursor_y}"), &x, &y)
	return x, y
}

// Labels with an emoji ZWJ sequence, a BOM and a bidi override: every
// row's cells stand where the header's do (each row's ALLOCATED figure,
// right-aligned, starts at the same column as a plain row's), and the
// override is shown as U+FFFD instead of reversing the text.
func TestOddLabelsKeepTheirRowAligned(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock)
	a := dialAgent(t, sock)
	a.hello("train.py", "2.5", "Test GPU")
	labels := []struct {
		label, alloc string
		mib          uint64
	}{
		{"plain label", "101.00", 101},
		{"👨\u200d👩\u200d👧 family", "202.00", 202},
		{"\uFEFFbom start", "303.00", 303},
		{"abc\u202Edef", "404.00", 404},
		{"🏳\uFE0F\u200d🌈 flag", "505.00", 505},
	}
	for _, l := range labels {
		a.mark(l.label, l.mib*mib)
	}
	tm.waitFor("505.00")
	x0, _ := tm.cellOf(labels[0].alloc)
	for _, l := range labels[1:] {
		if x, y := tm.cellOf(l.alloc); x != x0 {
			t.Errorf("row %+q: its ALLOCATED figure starts at column %d (line %d), a plain row's at %d\n%s",
				l.label, x, y, x0, tm.screen())
		}
	}
	if scr := tm.screen(); !strings.Contains(scr, "abc\uFFFDdef") {
		t.Errorf("the bidi override is not shown as U+FFFD:\n%s", scr)
	}
}
