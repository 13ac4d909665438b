package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func labels(st *store.Store) string {
	var out []string
	for _, r := range st.Rows() {
		out = append(out, r.Label)
	}
	return strings.Join(out, ",")
}

// tab gives the rows the focus; g, G, ↑/↓ and pgup/pgdn reach every row of
// a short table, and the selected row's details show under it.
func TestRowsScrollAndShowTheSelection(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 80, 24)
	tbl := ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "LABEL ↑5 ") || strings.Contains(strings.SplitN(tbl, "\n", 2)[0], "…") {
		t.Fatalf("the 80x24 table should hide earlier rows and say how many, uncut:\n%s", tbl)
	}
	m = send(t, m, press("tab")...)
	if m.focus != focusRows || m.table.sel != 5 {
		t.Fatalf("tab: focus %d, row %d; want the rows, the newest (5)", m.focus, m.table.sel)
	}
	if tbl = ansi.Strip(m.table.View()); !strings.HasPrefix(tbl, "▸LABEL") || !strings.Contains(tbl, "selected row 6 of 6: After cleanup at 0:01:06.0") {
		t.Errorf("the focused table should be marked and name its selected row:\n%s", tbl)
	}
	m = send(t, m, press("g")...)
	tbl = ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "selected row 1 of 6: Training start at 0:00:10.0, pid 4242") || !strings.Contains(tbl, "+") {
		t.Errorf("g should select the first row and show it:\n%s", tbl)
	}
	m = send(t, m, press("pgdown")...)
	if want := m.table.drawn.n; m.table.sel != want {
		t.Errorf("pgdown from row 0 went to %d, want a page (%d rows shown)", m.table.sel, want)
	}
	m = send(t, m, press("G", "up", "up")...)
	tbl = ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "selected row 4 of 6: Training end") ||
		!strings.Contains(tbl, "still held: optimizer (Adam) (16 tensors)\n1.25 GiB, model1") {
		// a short pane: the verdict names the holders (not a "held by"
		// line before it as well)
		t.Errorf("an end row's holders should show under the table, in its verdict:\n%s", tbl)
	}
	golden(t, "pane_table_80_selected", tbl)
	// the processes keep ↑/↓ once the focus is back; the table follows new rows again
	m = send(t, m, press("tab", "up")...)
	if m.focus != focusProcs || m.table.sel != -1 {
		t.Errorf("tab back: focus %d, row %d", m.focus, m.table.sel)
	}
	if r, _ := m.procs.Selected(); r.PID != otherPID {
		t.Errorf("↑ with the processes focused selected pid %d, want %d", r.PID, otherPID)
	}
}

// o sorts the processes by NVML used, by allocated, then by pid again; the
// sorted column's title says so and the selection stays on its process.
func TestProcessSortCycles(t *testing.T) {
	m := newModel(t, newFixture(), Options{}, 160, 50)
	first := func() string {
		lines := strings.Split(ansi.Strip(m.procs.View()), "\n")
		return lines[0] + "\n" + strings.Fields(lines[1])[0]
	}
	for _, want := range []string{"NVML USED▼\n4242", "ALLOCATED▼\n4242", "PID▲\n777"} {
		m = send(t, m, press("o")...)
		got := first()
		head, pid, _ := strings.Cut(want, "\n")
		if !strings.Contains(strings.Split(got, "\n")[0], head) || strings.Split(got, "\n")[1] != pid {
			t.Errorf("after o: header and first pid\n%s\nwant %q first, %s", got, head, pid)
		}
		if r, _ := m.procs.Selected(); r.PID != fixPID {
			t.Errorf("sorting moved the selection to pid %d", r.PID)
		}
	}
}

// r renames the selected row, x deletes one: the store, the chart's
// markers and the table follow, and the recorder sees each edit.
func TestRenameAndDeleteRows(t *testing.T) {
	st := newFixture()
	var edits []wire.RowEdit
	in := ingest.New(st)
	in.SetTap(tapFunc(func(f wire.Frame) {
		if e, ok := f.(wire.RowEdit); ok {
			edits = append(edits, e)
		}
	}))
	m := newModelIn(t, in, Options{}, 160, 50)
	m = send(t, m, press("r")...)
	if m.prompt.open || !strings.Contains(screen(m), "no row selected") {
		t.Fatalf("r without a selected row should say so:\n%s", screen(m))
	}
	m = send(t, m, press("tab", "up")...) // manual check
	m = send(t, m, press("r")...)
	if !strings.Contains(screen(m), "rename row to: manual check") {
		t.Fatalf("r should open the prompt on the label:\n%s", screen(m))
	}
	for range len("manual check") {
		m = send(t, m, press("backspace")...)
	}
	m = send(t, m, typeText("Checked by hand")...)
	m = send(t, m, press("enter")...)
	if got := labels(st); got != "Training start,Epoch 5,Epoch 10,Training end,Checked by hand,After cleanup" {
		t.Fatalf("rows after the rename: %s", got)
	}
	marks := ""
	for _, mk := range st.Markers() {
		marks += mk.Label + ","
	}
	if !strings.Contains(marks, "Checked by hand,") || strings.Contains(marks, "manual check") {
		t.Errorf("the marker should take the new label: %s", marks)
	}
	if !strings.Contains(ansi.Strip(m.table.View()), "selected row 5 of 6: Checked by hand") {
		t.Errorf("the renamed row should stay selected:\n%s", ansi.Strip(m.table.View()))
	}
	// the next s prompt is a snapshot's again
	m = send(t, m, press("up", "x")...) // Training end
	if !strings.Contains(screen(m), `delete row "Training end"? y deletes it, n keeps it`) {
		t.Fatalf("x should ask first:\n%s", screen(m))
	}
	m = send(t, m, press("esc")...)
	if strings.Count(labels(st), ",") != 5 {
		t.Fatalf("esc deleted a row: %s", labels(st))
	}
	m = send(t, m, press("x", "enter")...)
	if got := labels(st); got != "Training start,Epoch 5,Epoch 10,Checked by hand,After cleanup" {
		t.Fatalf("rows after the delete: %s", got)
	}
	for _, mk := range st.Markers() {
		if mk.Label == "Training end" {
			t.Errorf("the deleted row's marker stayed")
		}
	}
	if len(edits) != 2 || edits[0].Rename != "Checked by hand" || edits[0].Label != "manual check" ||
		!edits[1].Delete || edits[1].Label != "Training end" || edits[1].PID != fixPID {
		t.Errorf("recorded edits: %+v", edits)
	}
	m = send(t, m, press("s")...)
	if !strings.Contains(screen(m), "snapshot label: snapshot") {
		t.Errorf("after an edit, s should ask for a snapshot label again:\n%s", screen(m))
	}
}

type tapFunc func(wire.Frame)

func (f tapFunc) Frame(fr wire.Frame)                     { f(fr) }
func (f tapFunc) NVML(dev int, t int64, used, res uint64) {}

// ← and → move the cursor a tenth of the shown window at every zoom; in
// the whole-run zoom a tenth of the run (before: 0.1 s from the start).
func TestSeekTenthOfTheWindowAtEveryZoom(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{Replay: true}, 160, 50)
	start, last := st.Start(), st.End()
	m = send(t, m, press("+", "+")...) // 10 s
	for z := range zooms {
		if m.tl.zoom != z {
			t.Fatalf("zoom %d, want %d", m.tl.zoom, z)
		}
		m = send(t, m, press("home", "right")...)
		want := int64(zooms[z] / 10)
		if zooms[z] == 0 {
			want = (last - start) / 10
		}
		want = min(want, last-start)
		if got := m.tl.cursor(0) - start; got != want {
			t.Errorf("%s: → moved %v, want %v", zoomName(zooms[z]), time.Duration(got), time.Duration(want))
		}
		m = send(t, m, press("left")...)
		if got := m.tl.cursor(0); got != start {
			t.Errorf("%s: ← did not go back to the start: %v", zoomName(zooms[z]), time.Duration(got-start))
		}
		m = send(t, m, press("-")...)
	}
}

// n and p jump to the next and previous marker of the GPU and select its row.
func TestMarkerJumps(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{Replay: true}, 160, 50)
	start := st.Start()
	var want []string
	for _, mk := range st.Markers() {
		if mk.Dev == 0 {
			want = append(want, fmt.Sprintf("%s@%v", mk.Label, time.Duration(mk.T-start)))
		}
	}
	var got []string
	for range want {
		m = send(t, m, press("n")...)
		r, ok := m.table.Selected()
		if !ok {
			t.Fatalf("n selected no row at %v", time.Duration(m.tl.cursor(0)-start))
		}
		if r.T != m.tl.cursor(0) {
			t.Errorf("selected row %q at %v, cursor at %v", r.Label, time.Duration(r.T-start), time.Duration(m.tl.cursor(0)-start))
		}
		got = append(got, fmt.Sprintf("%s@%v", r.Label, time.Duration(m.tl.cursor(0)-start)))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("n visited %v, want %v", got, want)
	}
	m = send(t, m, press("n")...)
	if !strings.Contains(screen(m), "no marker after the cursor on GPU 0") {
		t.Errorf("n past the last marker should say so")
	}
	m = send(t, m, press("p", "p")...)
	if r, _ := m.table.Selected(); r.Label != "Training end" {
		t.Errorf("p p from the last marker selected %q, want Training end", r.Label)
	}
}

// A click selects the process or the row under it; the wheel over the
// chart zooms, over a pane it moves that pane's selection.
func TestMouse(t *testing.T) {
	m := newModel(t, newFixture(), Options{}, 160, 50)
	m.View() // the mouse acts on what was drawn
	g := *m.geo
	click := func(y int) tea.Msg { return tea.MouseClickMsg{X: 3, Y: y, Button: tea.MouseLeft} }
	wheel := func(y int, b tea.MouseButton) tea.Msg { return tea.MouseWheelMsg{X: 30, Y: y, Button: b} }
	m = send(t, m, click(g.procs.top+1)) // the first process row: other-job
	if r, _ := m.procs.Selected(); r.PID != otherPID {
		t.Errorf("a click on the first process row selected pid %d", r.PID)
	}
	m = send(t, m, click(g.table.top+2)) // the second row: Epoch 5
	if r, ok := m.table.Selected(); !ok || r.Label != "Epoch 5" || m.focus != focusRows {
		t.Errorf("a click on the second table row selected %q (focus %d)", r.Label, m.focus)
	}
	m = send(t, m, wheel(g.table.top+2, tea.MouseWheelDown))
	if r, _ := m.table.Selected(); r.Label != "Epoch 10" {
		t.Errorf("the wheel over the table selected %q, want Epoch 10", r.Label)
	}
	m = send(t, m, wheel(g.procs.top+1, tea.MouseWheelDown))
	if r, _ := m.procs.Selected(); r.PID != fixPID || m.focus != focusProcs {
		t.Errorf("the wheel over the processes selected pid %d (focus %d)", r.PID, m.focus)
	}
	z := m.tl.zoom
	m = send(t, m, wheel(g.chart.top+3, tea.MouseWheelUp))
	if m.tl.zoom != z-1 {
		t.Errorf("the wheel up over the chart: zoom %d, want %d", m.tl.zoom, z-1)
	}
	m = send(t, m, wheel(g.chart.top+3, tea.MouseWheelDown))
	if m.tl.zoom != z {
		t.Errorf("the wheel down over the chart: zoom %d, want %d", m.tl.zoom, z)
	}
	// a drag or a release redraws nothing
	before := m.version
	m = send(t, m, tea.MouseMotionMsg{X: 5, Y: 5, Button: tea.MouseLeft}, tea.MouseReleaseMsg{X: 5, Y: 5})
	if m.version != before {
		t.Errorf("mouse motion and release moved the frame version %d -> %d", before, m.version)
	}
	if v := m.View(); v.MouseMode != tea.MouseModeCellMotion {
		t.Errorf("mouse mode %v, want cell motion", v.MouseMode)
	}
}
