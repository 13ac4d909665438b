package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A replay answers every key, paused too, in a real terminal: [ and ] say
// the new speed while paused; d and D with one GPU say there is one; the
// delete prompt takes n (keeps the row) and y (deletes it) as answers, not
// as text; e names the CSV it wrote by its absolute path, gputop started
// in another directory with --csv relative to it.
func TestReplayFeedbackInTerminal(t *testing.T) {
	dir := t.TempDir()
	writeRecording(t, filepath.Join(dir, "run.gputop"))
	// env -C: gputop's working directory is dir (env execs it, so the
	// pane's process is gputop's)
	tm := startTermCmd(t, 120, 40, "env", "-C", dir, binary, "--replay", "run.gputop", "--csv", "out.csv")
	tm.waitFor("Recorded start")
	tm.waitFor("paused")

	tm.keys("]")
	tm.waitFor("replay speed 2x (paused: space plays)")
	tm.keys("[", "[")
	tm.waitFor("replay speed 0.5x (paused: space plays)")

	for _, k := range []string{"d", "D"} {
		tm.keys(k)
		tm.waitFor("one GPU (GPU 0): d and D have no other to switch to")
		tm.keys("]") // another status line before the next key
		tm.waitFor("replay speed")
	}

	tm.keys("Tab", "x")
	tm.waitFor(`delete row "Recorded start"? y deletes it, n keeps it`)
	tm.keys("n")
	scr := tm.waitFor("rows: ")
	if !strings.Contains(scr, "Recorded start") || strings.Contains(scr, "delete row") {
		t.Fatalf("n at the delete prompt should keep the row and close the prompt:\n%s", scr)
	}
	tm.keys("x")
	tm.waitFor(`delete row "Recorded start"? y deletes it, n keeps it`)
	tm.keys("y")
	scr = tm.waitFor(`deleted row "Recorded start"`)
	if tableHas(scr, "Recorded start") || strings.Contains(scr, "keeps it y") {
		t.Fatalf("y at the delete prompt should delete the row, not be typed:\n%s", scr)
	}

	tm.keys("e")
	want := filepath.Join(dir, "out.csv")
	scr = tm.waitFor("wrote ")
	if m := regexp.MustCompile(`wrote (\S+) \(`).FindStringSubmatch(scr); m == nil || m[1] != want {
		t.Fatalf("e should name %s (absolute), the status says:\n%s", want, scr)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatal(err)
	}
}
