package e2e

// Nothing cut that matters: at 80x24 and at 40x10, the least size, the
// verdict of an end row (with its fix) and an OOM's explanation are on the
// screen whole, either under the table or, where the screen is too short,
// in the whole text that enter shows (the pane saying so on its last
// line). The goldens in testdata hold the screens; the tests check the
// texts against what the summary package makes of the same recordings.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

var updateGoldens = flag.Bool("update", false, "rewrite e2e/testdata's screen goldens")

// screenGolden compares got with testdata/name.golden (or writes it).
func screenGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *updateGoldens {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./e2e -run %s -update writes it)", err, t.Name())
	}
	if string(want) == got {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			t.Errorf("%s differs at line %d:\nwant: %q\ngot:  %q\n(go test ./e2e -run %s -update if the change is intended)", path, i+1, w, g, t.Name())
			return
		}
	}
}

// squeeze drops every space and line break: a text wrapped onto several
// lines squeezed is the text squeezed.
func squeeze(s string) string { return strings.Join(strings.Fields(s), "") }

// wholeTitle is the whole text's title line: one page, or page k of n.
var wholeTitle = regexp.MustCompile(`whole text(?: (\d+)/(\d+))? \(enter`)

// wholeText presses enter and reads the whole text page by page until it
// closes: the screens, and the pages' lines (under their title, above the
// status line and the key bar) joined.
func (tm *term) wholeText() (screens []string, text string) {
	tm.t.Helper()
	var body []string
	tm.keys("Enter")
	scr := tm.waitFor("whole text (enter closes)", "whole text 1/")
	for page := 1; ; page++ {
		lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
		at := -1
		var m []string
		for i, l := range lines {
			if m = wholeTitle.FindStringSubmatch(l); m != nil {
				at = i
				break
			}
		}
		if at < 0 {
			tm.t.Fatalf("no whole text title on the screen:\n%s", scr)
		}
		screens = append(screens, scr)
		body = append(body, lines[at+1:len(lines)-2]...)
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		tm.keys("Enter")
		if page == n {
			break
		}
		scr = tm.waitFor(fmt.Sprintf("whole text %d/%d", page+1, n))
	}
	return screens, strings.Join(body, "\n")
}

// endVerdict is the verdict of the end row labelled label in the recording
// at path, as the TUI writes it: its text and what it is based on.
func endVerdict(t *testing.T, path, label string) string {
	t.Helper()
	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(path, st); err != nil {
		t.Fatal(err)
	}
	for _, r := range summary.RowsOf(st, st.Rows(), st.Devices()) {
		if r.Label == label && r.Verdict != nil {
			return r.Verdict.Text + " [" + r.Verdict.Basis + "]"
		}
	}
	t.Fatalf("%s: no end row %q with a verdict", path, label)
	return ""
}

// oomExplained is the OOM of the recording at path explained, as the TUI
// writes it: what was asked for, then the explanation.
func oomExplained(t *testing.T, path string) string {
	t.Helper()
	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(path, st); err != nil {
		t.Fatal(err)
	}
	devs := st.Devices()
	for _, r := range summary.RowsOf(st, st.Rows(), devs) {
		if r.OOM == nil {
			continue
		}
		var total uint64
		for _, d := range devs {
			if d.Index == r.Dev {
				total = d.Total
			}
		}
		e := summary.ExplainOOM(r, *r.OOM, total)
		return e.Asked + " " + e.Text()
	}
	t.Fatalf("%s: no OOM row", path)
	return ""
}

// legendItem is a series and its value in the legend (a long or a short
// name).
var legendItem = regexp.MustCompile(`━ (NVML used|NVML|reserved|res|peak|allocated|alloc) [0-9.]+ (B|KiB|MiB|GiB)`)

// replayTimes is a replay's title's end: the cursor and the run's total.
var replayTimes = regexp.MustCompile(`[0-9]+:[0-9]{2}:[0-9]{2}\.[0-9] / [0-9]+:[0-9]{2}:[0-9]{2}\.[0-9]( [a-z0-9 ]+)?$`)

// checkFrame holds what every screen of these tests keeps at its size: the
// title's times (the cursor and the run's total, whole), the header's
// figures labelled, the legend's values (series of them), a replay's key
// bar leading with space.
func checkFrame(t *testing.T, scr string, series int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	if title := lines[0]; !replayTimes.MatchString(title) || !strings.HasPrefix(title, " gputop ") {
		t.Errorf("the title should keep \"gputop\" and the replay's times whole: %q", title)
	}
	if h := lines[1]; !regexp.MustCompile(`mem [0-9.]+% +[0-9]+ samples/s`).MatchString(h) && !strings.Contains(h, "agent-only") {
		t.Errorf("the header's figures are not labelled (mem N%%, N samples/s): %q", h)
	}
	if bar := lines[len(lines)-1]; !strings.HasPrefix(bar, "space play/pause") {
		t.Errorf("a replay's key bar should lead with space: %q", bar)
	}
	if n := len(legendItem.FindAllString(scr, -1)); n < series {
		t.Errorf("the legend shows %d series' values, want %d:\n%s", n, series, scr)
	}
}

// The demo's ✗ verdict, its fix included, at 80x24 and 40x10: selected,
// whole under the table at 80x24 (the chart and the process pane give it
// lines); at 40x10, where the summary has no room, the screen says where
// it is; and whole in the whole text at both.
func TestWholeVerdictAtEverySize(t *testing.T) {
	want := endVerdict(t, "../demo/demo.gputop", "Training end")
	if !strings.Contains(want, "gputop.cleanup()") {
		t.Fatalf("the demo's Training end verdict lost its fix: %q", want)
	}
	for _, size := range [][2]int{{80, 24}, {40, 10}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tm := startTerm(t, size[0], size[1], "--demo")
			tm.waitFor("paused")
			tm.keys("Tab") // the rows, at the newest: After cleanup
			tm.waitFor("rows: ")
			tm.keys("k", "k")
			// at 40x10 the summary has no room: nothing on screen changes
			// (the whole text names the row selected)
			scr := tm.waitFor("rows: ")
			if size[1] >= 24 {
				scr = tm.waitFor("selected row 4 of 6: Training end")
			}
			checkFrame(t, scr, 4)
			switch {
			case size[1] >= 24 && !strings.Contains(squeeze(scr), squeeze("✗ selected row: "+want)):
				t.Errorf("at 80x24 the selected row's verdict should be whole under the table (%q):\n%s", want, scr)
			case !strings.Contains(squeeze(scr), squeeze(want)) && !strings.Contains(scr, "enter: whole text"):
				t.Errorf("the verdict is cut and no line says how to see it:\n%s", scr)
			}
			pages, text := tm.wholeText()
			if !strings.Contains(squeeze(text), squeeze(want)) || !strings.Contains(text, "selected row 4 of 6: Training end") {
				t.Errorf("the whole text lacks the selected row's verdict %q:\n%s", want, text)
			}
			for _, p := range pages {
				checkFrame(t, p, 0)
			}
			screenGolden(t, fmt.Sprintf("demo_verdict_%dx%d", size[0], size[1]),
				scr+"\n--- enter: the whole text ---\n"+strings.Join(pages, "\n--- enter ---\n"))
		})
	}
}

// The H200 OOM explained at 80x24 (whole under the table) and 40x10 (the
// status line says where it is; whole in the whole text).
func TestWholeOOMAtEverySize(t *testing.T) {
	const rec = "../testdata/recordings/h200-oom.gputop"
	want := oomExplained(t, rec)
	if !strings.Contains(want, "asked for 279.6 GiB") || !strings.Contains(want, "the work must be split") {
		t.Fatalf("the recording's OOM explained: %q", want)
	}
	for _, size := range [][2]int{{80, 24}, {40, 10}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tm := startTerm(t, size[0], size[1], "--replay", rec)
			scr := tm.waitFor("paused")
			if size[1] >= 24 {
				scr = tm.waitFor("✗ OOM")
				if !strings.Contains(squeeze(scr), squeeze(want)) {
					t.Errorf("at 80x24 the OOM's explanation should be whole under the table (%q):\n%s", want, scr)
				}
			} else if !strings.Contains(scr, "enter: whole text") {
				t.Errorf("at 40x10 the screen should say where the summary's text is:\n%s", scr)
			}
			checkFrame(t, scr, 3)
			pages, text := tm.wholeText()
			if !strings.Contains(squeeze(text), squeeze(want)) {
				t.Errorf("the whole text lacks the OOM's explanation %q:\n%s", want, text)
			}
			screenGolden(t, fmt.Sprintf("oom_%dx%d", size[0], size[1]),
				scr+"\n--- enter: the whole text ---\n"+strings.Join(pages, "\n--- enter ---\n"))
		})
	}
}
