package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lastLine is the screen's bottom line: the key bar.
func lastLine(scr string) string {
	lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	return lines[len(lines)-1]
}

// waitKeyBar waits until the bottom line ends with "? help • q quit".
func (tm *term) waitKeyBar(mode string) string {
	tm.t.Helper()
	scr := tm.waitFor("? help • q quit")
	if bar := strings.TrimRight(lastLine(scr), " "); !strings.HasSuffix(bar, "? help • q quit") {
		tm.t.Fatalf("%s: the key bar is %q, not ending with ? help • q quit:\n%s", mode, bar, scr)
	}
	return scr
}

// At 80x24, the real binary in tmux: `? help` and `q quit` are on the
// bottom line in every mode (live with an agent attached over the real
// socket and no GPU, replay, the demo, and with the label prompt open),
// and q quits.
func TestHelpAndQuitAt80x24InEveryMode(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	sock := filepath.Join(dir, "gputop.sock")
	for _, c := range []struct {
		mode string
		args []string
		wait string
	}{
		{"live", []string{"--source", "agent", "--socket", sock}, "● live"},
		{"replay", []string{"--replay", rec}, "Test GPU"},
		{"demo", []string{"--demo"}, "After cleanup"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			tm := startTerm(t, 80, 24, c.args...)
			tm.waitFor(c.wait)
			if c.mode == "live" {
				a := dialAgent(t, sock)
				a.hello("train.py", "2.11.0", "Fake GPU")
				a.mark("Epoch 1", 64*mib)
				tm.waitFor("Epoch 1")
			}
			bar := lastLine(tm.waitKeyBar(c.mode))
			if c.mode == "live" {
				tm.keys("s") // the label prompt
				scr := tm.waitFor("enter record")
				if bar := lastLine(scr); !strings.HasPrefix(bar, "enter record • esc ") {
					t.Fatalf("%s, prompt open: key bar %q", c.mode, bar)
				}
				tm.waitKeyBar(c.mode + ", prompt open")
				tm.keys("Escape")
				tm.waitFor("s snapshot") // the prompt closed
			} else {
				// a replay leads with space; s needs a live process and says so
				if !strings.HasPrefix(bar, "space play/pause") {
					t.Fatalf("%s: key bar %q, want it to lead with space", c.mode, bar)
				}
				tm.keys("s")
				tm.waitFor("a replay takes no snapshot")
				tm.waitKeyBar(c.mode + ", after s")
			}
			tm.keys("?")
			tm.waitFor("keys (? closes)")
			tm.waitKeyBar(c.mode + ", help open")
			tm.keys("?", "q")
			tm.waitExit()
			if _, err := os.Stat("/proc/" + itoa(tm.pid)); err == nil {
				t.Fatalf("%s: q did not quit:\n%s", c.mode, tm.screen())
			}
		})
	}
}

// At 40x10, the least size drawn, the demo still shows its device, a chart
// with its legend's values, and the key bar with help and quit.
func TestDemoAt40x10(t *testing.T) {
	tm := startTerm(t, 40, 10, "--demo")
	scr := tm.waitFor("GPU 0")
	for _, want := range []string{"└", "NVML", "GiB"} {
		if !strings.Contains(scr, want) {
			t.Fatalf("40x10 lacks %q:\n%s", want, scr)
		}
	}
	tm.waitKeyBar("demo at 40x10")
	tm.keys("?")
	tm.waitFor("page 1 of ")
	tm.waitKeyBar("demo at 40x10, help open")
}
