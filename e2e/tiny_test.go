package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// While the terminal is too small, the screen only says so, and keys do
// nothing but quit: s opens no prompt (which would take the q that follows
// as text), and q quits.
func TestTinyTerminalOnlyQuits(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	out := filepath.Join(dir, "summary.csv")
	tm := startTerm(t, 20, 5, "--replay", rec, "--csv", out)
	tm.waitFor("too small")
	tm.keys("s", "x", "e", "h")
	// keys come on the terminal's input, a resize as a signal: give the
	// program time to read the keys at the tiny size before it grows, or
	// a loaded machine can deliver the resize first
	time.Sleep(time.Second)
	tm.resize(160, 50)
	scr := tm.waitFor("Test GPU")
	if strings.Contains(scr, "snapshot label:") || strings.Contains(scr, "no process selected") || strings.Contains(scr, "wrote ") {
		t.Fatalf("keys pressed on the tiny screen acted:\n%s", scr)
	}
	tm.resize(20, 5)
	tm.waitFor("too small")
	tm.keys("s", "q")
	tm.waitExit()
	if _, err := os.Stat("/proc/" + itoa(tm.pid)); err == nil {
		t.Fatalf("q on the tiny screen did not quit:\n%s", tm.screen())
	}
	// q quits as it does on a full screen: --csv is written first
	if recs := readCSV(t, out); len(recs) != 2 || recs[1][0] != "Recorded start" {
		t.Fatalf("CSV on quit: %v", recs)
	}
}

func (tm *term) resize(w, h int) {
	tm.t.Helper()
	if out, err := tm.tmux("resize-window", "-t", tm.name, "-x", itoa(w), "-y", itoa(h)).CombinedOutput(); err != nil {
		tm.t.Fatalf("resize-window: %v: %s", err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
