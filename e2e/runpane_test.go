package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitUntil polls the screen until ok holds for it.
func (tm *term) waitUntil(what string, ok func(scr string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var scr string
	for time.Now().Before(deadline) {
		if scr = tm.screen(); ok(scr) {
			return scr
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("screen never showed %s; last screen:\n%s", what, scr)
	return ""
}

// paneTitle is the output pane's title line.
func paneTitle(scr string) string {
	for _, l := range strings.Split(scr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "output ") {
			return l
		}
	}
	return ""
}

// gputop run's output pane in a real terminal over a real command: K/J
// (shift+↑/↓) scroll it, O hides and shows it, keys typed into the label
// prompt are text (O there hides nothing), the first Ctrl-C goes to the
// command, and once it has ended the pane says how and q quits.
func TestRunOutputPaneKeysInTerminal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run.sock")
	script := `i=0; while [ $i -lt 60 ]; do echo line$i; i=$((i+1)); done
trap 'echo got INT; kill $!; exit 3' INT
sleep 100 & wait`
	tm := startTerm(t, 100, 30, "run", "--source", "agent", "--socket", sock, "--", "sh", "-c", script)
	scr := tm.waitFor("line59")
	if title := paneTitle(scr); !strings.Contains(title, "O hide · K/J scroll") || strings.Contains(title, "q quit") {
		t.Fatalf("running command's pane title: %q", title)
	}

	tm.keys("K", "S-Up") // two lines back
	scr = tm.waitFor("(scrolled back)")
	scr = tm.waitUntil("line57 at the bottom", func(s string) bool { return !strings.Contains(s, "line59") && strings.Contains(s, "line57") })
	tm.keys("J")
	tm.waitUntil("line58 at the bottom", func(s string) bool { return strings.Contains(s, "line58") && !strings.Contains(s, "line59") })
	tm.keys("S-Down")
	tm.waitUntil("the newest line again", func(s string) bool {
		return strings.Contains(s, "line59") && !strings.Contains(s, "(scrolled back)")
	})

	tm.keys("O")
	scr = tm.waitFor("O show output")
	if strings.Contains(scr, "line5") {
		t.Fatalf("O should hide the output:\n%s", scr)
	}
	tm.keys("O")
	tm.waitFor("line59")
	tm.waitFor("O hide · K/J scroll")

	// with the label prompt open, O is text for the label
	a := dialAgent(t, sock)
	a.hello("train.py", "2.11.0", "Fake GPU")
	tm.waitFor("Fake GPU")
	tm.keys("s")
	tm.waitFor("snapshot label:")
	tm.keys("O")
	scr = tm.waitFor("snapshot 1O")
	if !strings.Contains(scr, "line59") || !strings.Contains(paneTitle(scr), "O hide") {
		t.Fatalf("O in the prompt acted on the pane:\n%s", scr)
	}
	tm.keys("Escape")
	tm.waitUntil("the prompt closed", func(s string) bool { return !strings.Contains(s, "snapshot label:") })

	tm.keys("C-c") // to the command, which traps it
	tm.waitFor("got INT")
	scr = tm.waitFor("exited with code 3")
	if title := paneTitle(scr); !strings.Contains(title, "O hide · K/J scroll · q quit") {
		t.Fatalf("ended command's pane title: %q", title)
	}
	tm.keys("q")
	tm.waitExit()
	if tm.alive() {
		t.Fatalf("q did not quit after the command ended:\n%s", tm.screen())
	}
}

// alive is true while gputop's process runs: a zombie has exited (a busy
// tmux server can take seconds to reap it).
func (tm *term) alive() bool {
	stat, err := os.ReadFile("/proc/" + itoa(tm.pid) + "/stat")
	if err != nil {
		return false
	}
	// the state follows the command name, which is in parentheses
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
