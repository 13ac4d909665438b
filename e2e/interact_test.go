package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// rowsRecording writes a real recording of secs seconds of one device
// (NVML at 100/s) with twelve
// rows ("row 01" at 1 s … "row 12" at 12 s) and three processes
// NVML lists: pid 100 uses 1 GiB, pid 200 3 GiB, pid 300 2 GiB.
func rowsRecording(t *testing.T, path string, secs int) {
	t.Helper()
	in, done := testRecording(t, path, 1000, "GPU-test", 80<<30)
	procs := []wire.Proc{{PID: 300, Name: "middle", Used: 2 << 30}, {PID: 100, Name: "small", Used: 1 << 30}, {PID: 200, Name: "big", Used: 3 << 30}}
	for i := 0; i <= secs*100; i++ {
		tt := base + int64(i)*int64(10*time.Millisecond)
		in.NVML(0, tt, 6<<30, 512*mib)
		if i%10 == 0 {
			in.Apply(0, wire.Procs{Type: wire.TypeProcs, T: tt, Dev: 0, Procs: procs})
		}
		if i > 0 && i%100 == 0 && i <= 1200 {
			in.TakeSnapshot(fmt.Sprintf("row %02d", i/100), 0, tt, "key", nil)
		}
	}
	done()
}

// replayAtEnd starts gputop on a 20 s rows recording at w x h, at its end.
func replayAtEnd(t *testing.T, w, h int, args ...string) (*term, string) {
	return replayLong(t, 20, w, h, args...)
}

func replayLong(t *testing.T, secs, w, h int, args ...string) (*term, string) {
	t.Helper()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rows.gputop")
	rowsRecording(t, rec, secs)
	tm := startTerm(t, w, h, append([]string{"--replay", rec}, args...)...)
	tm.waitFor("Test GPU")
	tm.keys("End")
	tm.waitFor("row 12")
	return tm, dir
}

// mouse sends an SGR mouse event (button 0: left press, 64/65: wheel up /
// down) at the 0-based cell x, y, as a terminal would.
func (tm *term) mouse(button, x, y int) {
	tm.t.Helper()
	tm.keys("-l", fmt.Sprintf("\x1b[<%d;%d;%dM", button, x+1, y+1))
}

// tableHas reports whether a line of the screen starts with label, as a
// row of the summary does (the chart's markers are above the axis).
func tableHas(scr, label string) bool {
	for _, l := range strings.Split(scr, "\n") {
		if strings.HasPrefix(l, label+" ") {
			return true
		}
	}
	return false
}

// lineOf is the 0-based screen line holding s.
func lineOf(t *testing.T, scr, s string) int {
	t.Helper()
	for i, l := range strings.Split(scr, "\n") {
		if strings.Contains(l, s) {
			return i
		}
	}
	t.Fatalf("%q not on screen:\n%s", s, scr)
	return -1
}

// At 80x24 the table shows a few of its twelve rows; tab, g, G and pgup
// reach every one, and the selected row is named under the table.
func TestTableScrollsInTerminal(t *testing.T) {
	tm, _ := replayAtEnd(t, 80, 24)
	scr := tm.waitFor("LABEL ↑")
	if tableHas(scr, "row 01") {
		t.Fatalf("the 80x24 table should not hold all twelve rows:\n%s", scr)
	}
	tm.keys("Tab")
	tm.waitFor("selected row 12 of 12: row 12")
	tm.keys("g")
	scr = tm.waitFor("selected row 1 of 12: row 01")
	if lineOf(t, scr, "row 01 ") >= lineOf(t, scr, "selected row 1 of 12") {
		t.Fatalf("row 01 should be in the table above its details:\n%s", scr)
	}
	shown := 0 // the table's rows on screen
	for _, l := range strings.Split(scr, "\n") {
		if strings.HasPrefix(l, "row ") {
			shown++
		}
	}
	tm.keys("NPage")
	tm.waitFor(fmt.Sprintf("selected row %d of 12", 1+shown))
	tm.keys("PPage")
	tm.waitFor("selected row 1 of 12")
	tm.keys("G", "Up")
	tm.waitFor("selected row 11 of 12: row 11")
}

// o sorts the processes by NVML used, then allocated (no process here has
// an agent: pid order), then pid; the sorted column's title has the arrow.
func TestProcessSortInTerminal(t *testing.T) {
	tm, _ := replayAtEnd(t, 160, 50)
	order := func(scr string) string {
		var pids []string
		for _, l := range strings.Split(scr, "\n") {
			f := strings.Fields(l)
			if len(f) > 1 && (f[1] == "small" || f[1] == "big" || f[1] == "middle") {
				pids = append(pids, f[0])
			}
		}
		return strings.Join(pids, ",")
	}
	for _, step := range []struct{ key, title, want string }{
		{"", "PID▲", "100,200,300"},
		{"o", "NVML USED▼", "200,300,100"},
		{"o", "ALLOCATED▼", "100,200,300"},
		{"o", "PID▲", "100,200,300"},
	} {
		if step.key != "" {
			tm.keys(step.key)
		}
		scr := tm.waitFor(step.title)
		if got := order(scr); got != step.want {
			t.Fatalf("sorted by %s: pids %s, want %s:\n%s", step.title, got, step.want, scr)
		}
	}
}

// csvLabels are the labels of a CSV's rows.
func csvLabels(t *testing.T, path string) string {
	t.Helper()
	var out []string
	for _, r := range readCSV(t, path)[1:] {
		out = append(out, r[0])
	}
	return strings.Join(out, ",")
}

// r renames the selected row and x deletes one; the CSV written by e has
// the new label and not the deleted row.
func TestRenameAndDeleteInTerminal(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "summary.csv")
	tm, _ := replayAtEnd(t, 160, 50, "--csv", out)
	tm.keys("Tab") // row 12
	tm.waitFor("selected row 12 of 12")
	tm.keys("r")
	tm.waitFor("rename row to: row 12")
	tm.keys("C-u")
	tm.keys("-l", "Eval done")
	tm.keys("Enter")
	tm.waitFor(`renamed row "row 12" to "Eval done"`)
	tm.keys("Up", "x")
	tm.waitFor(`delete row "row 11"? y deletes it, n keeps it`)
	tm.keys("y")
	scr := tm.waitFor(`deleted row "row 11"`)
	if tableHas(scr, "row 11") {
		t.Fatalf("the deleted row is still on screen:\n%s", scr)
	}
	tm.keys("e")
	tm.waitFor("wrote " + out)
	want := "row 01,row 02,row 03,row 04,row 05,row 06,row 07,row 08,row 09,row 10,Eval done"
	if got := csvLabels(t, out); got != want {
		t.Fatalf("CSV labels %s, want %s", got, want)
	}
}

// A live TUI with --record writes the recording gputop record would, with
// the edits: its export and its replay show the rows as the user left them.
func TestTUIRecordingFollowsEdits(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	rec := filepath.Join(dir, "live.gputop")
	out := filepath.Join(dir, "live.csv")
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock, "--record", rec, "--csv", out)
	tm.waitFor("listening on")
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now().UnixNano()
	enc := json.NewEncoder(c)
	frames := []any{wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: 4242, Argv: []string{"train.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-fake", Name: "Fake GPU", Total: 80 << 30}}, T: now}}
	for i, l := range []string{"Training start", "Epoch 1", "Epoch 2"} {
		frames = append(frames, wire.Mark{Type: wire.TypeMark, T: now + int64(i+1)*int64(time.Millisecond), Label: l,
			Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i+1) << 30, Reserved: 4 << 30, Peak: 4 << 30}}})
	}
	for _, f := range frames {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	go bufio.NewReader(c).ReadBytes('\n') // answers, if any, are not the test's
	tm.waitFor("Epoch 2")
	tm.keys("Tab", "Up") // Epoch 1
	tm.waitFor("selected row 2 of 3: Epoch 1")
	tm.keys("r", "C-u")
	tm.keys("-l", "First epoch")
	tm.keys("Enter")
	tm.waitFor(`renamed row "Epoch 1"`)
	tm.keys("Down", "x")
	tm.waitFor(`delete row "Epoch 2"?`)
	tm.keys("Enter")
	tm.waitFor(`deleted row "Epoch 2"`)
	tm.keys("q")
	tm.waitExit()
	if got := csvLabels(t, out); got != "Training start,First epoch" {
		t.Fatalf("the TUI's CSV: %s", got)
	}
	exported := filepath.Join(dir, "export.csv")
	if o, code := run(t, "export", rec, "--csv", exported); code != 0 {
		t.Fatalf("export: %d %s", code, o)
	}
	if got := csvLabels(t, exported); got != "Training start,First epoch" {
		t.Fatalf("the recording's export: %s", got)
	}
	rt := startTerm(t, 160, 50, "--replay", rec)
	rt.keys("End")
	scr := rt.waitFor("First epoch")
	if strings.Contains(scr, "Epoch 2") || strings.Contains(scr, "Epoch 1") {
		t.Fatalf("the replay shows a row as it was before the edit:\n%s", scr)
	}
}

// A click selects the process or the row under it; the wheel over the
// table moves its selection and over the chart zooms.
func TestMouseInTerminal(t *testing.T) {
	tm, _ := replayLong(t, 130, 160, 50) // long enough for a 1m window
	scr := tm.waitFor("row 12")
	y := lineOf(t, scr, "row 05 ")
	tm.mouse(0, 3, y)
	tm.waitFor("selected row 5 of 12: row 05")
	tm.mouse(65, 3, y) // wheel down over the table
	tm.waitFor("selected row 6 of 12: row 06")
	tm.mouse(64, 3, y)
	tm.waitFor("selected row 5 of 12: row 05")
	// a click on a process: the holders pane is about that one (the
	// selected row's details moved the panes: read the screen again)
	scr = tm.screen()
	tm.mouse(0, 3, lineOf(t, scr, " middle "))
	tm.keys("h")
	tm.waitFor("pid 300 has no agent")
	tm.keys("h")
	tm.waitFor("window 1m")
	chartY := lineOf(t, tm.screen(), "GPU 0  Test GPU") + 5
	tm.mouse(64, 40, chartY) // wheel up over the chart: zoom in
	tm.waitFor("window 30s")
	tm.mouse(65, 40, chartY)
	tm.waitFor("window 1m")
}

var cursorAt = regexp.MustCompile(`cursor (\d+):(\d\d):(\d\d)\.(\d)`)

// cursor reads the replay cursor from the title bar.
func (tm *term) cursor() time.Duration {
	tm.t.Helper()
	m := cursorAt.FindStringSubmatch(tm.screen())
	if m == nil {
		tm.t.Fatalf("no cursor in the title:\n%s", tm.screen())
	}
	var h, mi, s, d int
	fmt.Sscan(m[1], &h)
	fmt.Sscan(m[2], &mi)
	fmt.Sscan(m[3], &s)
	fmt.Sscan(m[4], &d)
	return time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(s)*time.Second + time.Duration(d)*100*time.Millisecond
}

// waitCursor waits until the title's cursor is at d.
func (tm *term) waitCursor(d time.Duration) {
	tm.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if tm.cursor() == d {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.t.Fatalf("cursor at %v, want %v:\n%s", tm.cursor(), d, tm.screen())
}

// At every zoom a 130 s run reaches from its end (- jumps to the whole
// run past a window 1.5 times the run), → moves the cursor a tenth of the
// window (of the run in the whole-run zoom; before, 0.1 s from the start
// there), and ← moves it back.
func TestSeekEveryZoomInTerminal(t *testing.T) {
	tm, _ := replayLong(t, 130, 160, 50)
	tm.keys("+", "+") // 10 s
	for _, z := range []struct {
		name string
		step time.Duration
	}{
		{"10s", time.Second}, {"30s", 3 * time.Second}, {"1m", 6 * time.Second}, {"whole run", 13 * time.Second},
	} {
		tm.waitFor("window " + z.name)
		tm.keys("Home")
		tm.waitCursor(0)
		tm.keys("Right")
		tm.waitCursor(z.step)
		tm.keys("Right")
		tm.waitCursor(2 * z.step)
		tm.keys("Left")
		tm.waitCursor(z.step)
		tm.keys("End", "-")
	}
}

// n and p jump to the next and previous marker and select its row.
func TestMarkerJumpsInTerminal(t *testing.T) {
	tm, _ := replayAtEnd(t, 160, 50)
	tm.keys("Home")
	tm.waitCursor(0)
	tm.keys("n")
	tm.waitFor(`marker "row 01" at 0:00:01.0`)
	tm.waitCursor(time.Second)
	tm.waitFor("selected row 1 of 1: row 01")
	tm.keys("n", "n")
	tm.waitCursor(3 * time.Second)
	tm.waitFor("selected row 3 of 3: row 03")
	tm.keys("p")
	tm.waitCursor(2 * time.Second)
	tm.waitFor("selected row 2 of 2: row 02")
}

// --record never replaces a file that holds data (the TUI has no --force)
// and refuses standard output, where the TUI draws; nothing starts.
func TestTUIRecordRefusesWhatItWouldReplace(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.gputop")
	if err := os.WriteFile(old, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	out, code := run(t, "--source", "agent", "--socket", sock, "--record", old)
	if code != 1 || !strings.Contains(out, "--record "+old) || !strings.Contains(out, "give another name") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if b, _ := os.ReadFile(old); string(b) != "kept\n" {
		t.Fatalf("the file changed: %q", b)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Fatalf("the socket was started")
	}
	out, code = run(t, "--source", "agent", "--socket", sock, "--record", "-")
	if code != 1 || !strings.Contains(out, "the TUI draws on standard output") {
		t.Fatalf("--record -: exit %d: %s", code, out)
	}
	if out, code = run(t, "--demo", "--record", filepath.Join(dir, "new.gputop")); code != 2 || !strings.Contains(out, "does not go with --demo") {
		t.Fatalf("--demo --record: exit %d: %s", code, out)
	}
}
