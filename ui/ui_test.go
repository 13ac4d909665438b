package ui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

const fixTitle = "demo: H200 MLP training"

// checkBox fails when the screen is not exactly h lines of at most w cells.
func checkBox(t *testing.T, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Errorf("screen has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line %d is %d cells wide, want <= %d: %q", i+1, n, w, ansi.Strip(l))
		}
	}
}

func TestGoldenScreens(t *testing.T) {
	for _, sz := range [][2]int{{160, 50}, {80, 24}, {20, 5}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newModel(t, newFixture(), Options{Title: fixTitle}, sz[0], sz[1])
			v := m.View()
			if !v.AltScreen {
				t.Error("the view should use the alternate screen")
			}
			checkBox(t, v.Content, sz[0], sz[1])
			golden(t, fmt.Sprintf("screen_%dx%d", sz[0], sz[1]), screen(m))
		})
	}
}

func TestGoldenPanes(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 160, 50)
	golden(t, "pane_header", ansi.Strip(m.header.View()))
	golden(t, "pane_chart", ansi.Strip(m.chart.View()))
	golden(t, "pane_procs", ansi.Strip(m.procs.View()))
	golden(t, "pane_table", ansi.Strip(m.table.View()))
	m = send(t, m, press("h")...)
	golden(t, "pane_holders", ansi.Strip(m.holders.View()))
	golden(t, "screen_160x50_holders", screen(m))
	m = send(t, m, press("h", "?")...)
	golden(t, "screen_120x40_help", screen(send(t, m, tea.WindowSizeMsg{Width: 120, Height: 40})))

	// narrow panes drop low-priority columns rather than wrap
	m = newModel(t, newFixture(), Options{Title: fixTitle}, 80, 24)
	golden(t, "pane_table_80", ansi.Strip(m.table.View()))
	golden(t, "pane_procs_80", ansi.Strip(m.procs.View()))
}

func TestTooSmallNeverPanics(t *testing.T) {
	for _, sz := range [][2]int{{20, 5}, {39, 10}, {40, 9}, {1, 1}, {0, 0}, {40, 10}} {
		m := newModel(t, newFixture(), Options{Title: fixTitle}, sz[0], sz[1])
		m = send(t, m, press("s", "x", "enter", "h", "?", "tab", "+", "-", "space", "left", "e")...)
		out := screen(m)
		small := sz[0] < MinWidth || sz[1] < MinHeight
		if small && sz[0] >= 10 && sz[1] >= 2 && !strings.Contains(strings.ReplaceAll(out, "\n", " "), "too small") {
			t.Errorf("%dx%d: want a 'too small' notice, got %q", sz[0], sz[1], out)
		}
		if sz[0] > 0 {
			checkBox(t, m.View().Content, sz[0], sz[1])
		}
	}
	for _, replay := range []bool{false, true} {
		m := newModel(t, newFixture(), Options{Replay: replay, Title: "/a/rather/long/path/to/a/recording.gputop"}, 40, 10)
		m = send(t, m, press("end", "-", "-", "-", "-", "-", "-", "]", "h")...)
		checkBox(t, m.View().Content, 40, 10)
	}
	m := newModel(t, newFixture(), Options{}, 20, 5)
	if out := screen(m); !strings.Contains(out, "(20x5)") {
		t.Errorf("the notice should name the size: %q", out)
	}
}

func TestSnapshotFlowAddsRowInSameFrame(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	before := len(st.Rows())
	m = send(t, m, press("s")...)
	if !m.prompt.open || m.prompt.input.Value() != fmt.Sprintf("snapshot %d", before+1) {
		t.Fatalf("s should open the prompt prefilled with %q, got open=%v %q", fmt.Sprintf("snapshot %d", before+1), m.prompt.open, m.prompt.input.Value())
	}
	if !strings.Contains(screen(m), "snapshot label: snapshot 7") {
		t.Errorf("the prompt is not on screen")
	}
	// replace the default label
	for range len("snapshot 7") {
		m = send(t, m, press("backspace")...)
	}
	m = send(t, m, typeText("Eval done")...)
	m = send(t, m, press("enter")...)
	snaps := st.Rows()
	if len(snaps) != before+1 {
		t.Fatalf("Enter added %d rows, want 1", len(snaps)-before)
	}
	row := snaps[len(snaps)-1]
	if row.Label != "Eval done" || row.Source != "key" || row.Dev != 0 || row.T != fixtureNow.UnixNano() {
		t.Errorf("row = %+v, want label Eval done, source key, GPU 0, at now", row)
	}
	if row.PID != fixPID || row.Allocated == nil || *row.Allocated != 1*gib+256*mib+256*kib {
		t.Errorf("the row should carry the selected agent process's allocator values: %+v", row)
	}
	// the very model Update returned shows it: no tick needed
	out := screen(m)
	if !strings.Contains(out, "Eval done") {
		t.Fatalf("the new row is not on screen right after Enter:\n%s", out)
	}
	if m.prompt.open {
		t.Errorf("the prompt should close on Enter")
	}
	// the row also shows as a marker above the chart
	if !strings.Contains(ansi.Strip(m.chart.View()), "Eval done") {
		t.Errorf("no chart marker for the new snapshot")
	}

	// Esc cancels, an empty label falls back to the default
	m = send(t, m, press("s", "x", "esc")...)
	if len(st.Rows()) != before+1 || m.prompt.open {
		t.Errorf("Esc should cancel without a row")
	}
	m = send(t, m, press("s")...)
	for range 20 {
		m = send(t, m, press("backspace")...)
	}
	m = send(t, m, press("enter")...)
	if snaps := st.Rows(); snaps[len(snaps)-1].Label != fmt.Sprintf("snapshot %d", before+2) {
		t.Errorf("an empty label should become the default, got %q", snaps[len(snaps)-1].Label)
	}
}

func TestExportUnwritablePathKeepsRows(t *testing.T) {
	st := newFixture()
	write := func(path string) error { return summary.WriteCSV(path, st.Rows(), st.Devices()) }
	bad := filepath.Join(t.TempDir(), "no-such-dir", "out.csv")
	m := newModel(t, st, Options{Title: fixTitle, CSVPath: bad, WriteCSV: write}, 160, 50)
	rows := len(st.Rows())
	m = send(t, m, press("e")...)
	out := screen(m)
	if !strings.Contains(out, "cannot write "+bad) {
		t.Fatalf("the status line should name the path that failed:\n%s", out)
	}
	if len(st.Rows()) != rows || !strings.Contains(out, "After cleanup") {
		t.Errorf("a failed export must keep every row")
	}
	if m.status.isErr != true {
		t.Errorf("the failure should be shown as an error")
	}

	good := filepath.Join(t.TempDir(), "summary.csv")
	m.opt.CSVPath = good
	m = send(t, m, press("e")...)
	if want := fmt.Sprintf("wrote %s (%s)", good, plural(rows, "row")); !strings.Contains(screen(m), want) {
		t.Errorf("status should say %q:\n%s", want, screen(m))
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != rows+1 {
		t.Errorf("CSV has %d lines, want header + %d rows", lines, rows)
	}
	if !strings.HasPrefix(string(data), "label,time,device,allocated_mb,reserved_mb,peak_mb,nvml_used_mb") {
		t.Errorf("CSV header: %q", strings.SplitN(string(data), "\n", 2)[0])
	}
}

func TestExportDefaultPathAndMissingWriter(t *testing.T) {
	var got string
	m := newModel(t, newFixture(), Options{WriteCSV: func(p string) error { got = p; return nil }}, 160, 50)
	m = send(t, m, press("e")...)
	if want := summary.DefaultCSVPath(fixtureNow); got != want {
		t.Errorf("e without --csv wrote %q, want %q", got, want)
	}
	m = newModel(t, newFixture(), Options{}, 160, 50)
	m = send(t, m, press("e")...)
	if !strings.Contains(screen(m), "CSV export is not available") {
		t.Errorf("e without a writer should say so")
	}
}

// quitMsgOf runs cmd and reports whether it quits the program.
func quits(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func TestQuitWritesCSVWhenAsked(t *testing.T) {
	st := newFixture()
	var wrote []string
	fail := true
	write := func(p string) error {
		if fail {
			return errors.New("cannot write /ro/x.csv: read-only file system")
		}
		wrote = append(wrote, p)
		return nil
	}
	m := newModel(t, st, Options{CSVPath: "/ro/x.csv", WriteCSV: write}, 160, 50)
	nm, cmd := m.Update(keyMsg("q"))
	m = nm.(Model)
	msg := cmd()
	if _, ok := msg.(csvMsg); !ok {
		t.Fatalf("q with --csv should write first, got %T", msg)
	}
	nm, cmd = m.Update(msg)
	m = nm.(Model)
	if quits(cmd) {
		t.Fatal("a failed write on quit must not quit (the rows would be lost)")
	}
	if !strings.Contains(screen(m), "press q again to quit without writing") {
		t.Errorf("the status should explain the second q:\n%s", screen(m))
	}
	if _, cmd = m.Update(keyMsg("q")); !quits(cmd) {
		t.Errorf("a second q should quit")
	}

	fail = false
	m = newModel(t, st, Options{CSVPath: "out.csv", WriteCSV: write}, 160, 50)
	_, cmd = m.Update(keyMsg("ctrl+c"))
	msg = cmd()
	if _, cmd = m.Update(msg); !quits(cmd) || len(wrote) != 1 || wrote[0] != "out.csv" {
		t.Errorf("ctrl+c with --csv should write out.csv then quit (wrote %v)", wrote)
	}
	m = newModel(t, st, Options{}, 160, 50)
	if _, cmd = m.Update(keyMsg("q")); !quits(cmd) {
		t.Errorf("q without --csv should quit at once")
	}
}

func TestDeviceErrorShownWhileOthersWork(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 160, 50)
	lines := strings.Split(ansi.Strip(m.header.View()), "\n")
	if len(lines) != 2 {
		t.Fatalf("header has %d lines, want one per device", len(lines))
	}
	if !strings.Contains(lines[1], "NVML: GPU is lost") {
		t.Errorf("GPU 1's error is not shown: %q", lines[1])
	}
	if strings.Contains(lines[0], "NVML:") || !strings.Contains(lines[0], "2.49 GiB / 140.4 GiB") || !strings.Contains(lines[0], "mem 1.8%") || !strings.Contains(lines[0], "998 samples/s") {
		t.Errorf("GPU 0 should show its figures and rate: %q", lines[0])
	}
	if !strings.HasPrefix(lines[0], "▸") {
		t.Errorf("the selected device should be marked: %q", lines[0])
	}
	// switching to the failed device still shows what it recorded before
	m = send(t, m, press("d")...)
	if !strings.HasPrefix(strings.Split(ansi.Strip(m.header.View()), "\n")[1], "▸") {
		t.Errorf("d should select GPU 1")
	}
	m = send(t, m, press("home")...) // back to the start of the run, where GPU 1 had samples
	if !strings.Contains(ansi.Strip(m.chart.View()), "NVML used (driver) 600.0 MiB") {
		t.Errorf("GPU 1's chart should show its last figures:\n%s", ansi.Strip(m.chart.View()))
	}
	m = send(t, m, press("d")...)
	if m.dev != 0 {
		t.Errorf("d should cycle back to GPU 0")
	}
}

func TestAgentOnlyDeviceAndNoAgent(t *testing.T) {
	st := store.New(store.DefaultOptions())
	// an NVML device with no agent at all
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml", Rate: 1000})
	for ms := 0; ms <= 10_000; ms += 10 {
		st.AddNVML(0, at(time.Duration(ms)*time.Millisecond), 600*mib, 0)
	}
	st.SetProcs(0, at(10*time.Second), []wire.Proc{{PID: 11, Name: "python3", Used: 100 * mib}})
	st.TakeSnapshot("before", 0, at(5*time.Second), "key", nil, false)
	// a GPU NVML does not know, seen only through an agent
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 99, Argv: []string{"python", "nb.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-zzzz", Name: "NVIDIA A100", Total: 40 * gib}}, T: at(time.Second)})
	for ms := 1000; ms <= 10_000; ms += 100 {
		st.AgentSample(99, wire.Sample{Type: wire.TypeSample, T: at(time.Duration(ms) * time.Millisecond), Dev: 0, Allocated: 300 * mib, Reserved: 512 * mib, Peak: 400 * mib})
	}
	now := time.Unix(0, at(10*time.Second))
	m := newModel(t, st, Options{Now: func() time.Time { return now }}, 160, 40)

	out := screen(m)
	if !strings.Contains(out, "allocator: no agent attached") {
		t.Errorf("GPU 0 has no agent; the legend must say so:\n%s", out)
	}
	if strings.Contains(ansi.Strip(m.chart.View()), "(torch)") {
		t.Errorf("no torch series may be drawn without an agent")
	}
	tbl := ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "ALLOCATED MiB (no agent)") || !strings.Contains(tbl, "—") {
		t.Errorf("allocator columns without an agent should say so and show dashes:\n%s", tbl)
	}
	for _, l := range strings.Split(tbl, "\n") {
		if strings.HasPrefix(l, "before") && strings.Contains(l, " 0.00 ") {
			t.Errorf("a missing value was shown as 0: %q", l)
		}
	}
	hdr := strings.Split(ansi.Strip(m.header.View()), "\n")
	if len(hdr) != 2 || !strings.Contains(hdr[1], "agent-only") || !strings.Contains(hdr[1], "NVIDIA A100") {
		t.Errorf("the agent-only GPU should be labelled: %q", hdr)
	}

	m = send(t, m, press("d")...)
	procs := ansi.Strip(m.procs.View())
	if !strings.Contains(procs, "python nb.py") || !strings.Contains(procs, "attached") || !strings.Contains(procs, "300.0 MiB") {
		t.Errorf("a process known only through its agent should still show:\n%s", procs)
	}
	chart := ansi.Strip(m.chart.View())
	if !strings.Contains(chart, "allocated (torch) 300.0 MiB") || !strings.Contains(chart, "NVML: no samples for this GPU") {
		t.Errorf("the agent-only GPU's chart should have torch series and say NVML has none:\n%s", chart)
	}
}

func TestProcessSelectionDrivesChart(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 160, 50)
	if r, _ := m.procs.Selected(); r.PID != fixPID {
		t.Fatalf("the agent process should be selected first, got %d", r.PID)
	}
	procs := ansi.Strip(m.procs.View())
	if !strings.Contains(procs, "PROC NON-TORCH") || !strings.Contains(procs, "500.0 MiB") {
		t.Errorf("non-PyTorch memory (NVML used - torch reserved) is missing:\n%s", procs)
	}
	m = send(t, m, press("up")...)
	if r, _ := m.procs.Selected(); r.PID != otherPID {
		t.Fatalf("up should select pid %d", otherPID)
	}
	if c := ansi.Strip(m.chart.View()); !strings.Contains(c, "pid 777 has no agent") || strings.Contains(c, "allocated (torch)") {
		t.Errorf("the chart's allocator series should follow the selection:\n%s", c)
	}
	// a user's choice sticks across frames
	m = send(t, m, tickMsg(fixtureNow))
	if r, _ := m.procs.Selected(); r.PID != otherPID {
		t.Errorf("the selection jumped back to %d", r.PID)
	}
	m = send(t, m, press("down")...)
	if c := ansi.Strip(m.chart.View()); !strings.Contains(c, "allocated (torch) 1.25 GiB") {
		t.Errorf("selecting the agent process should bring its series back:\n%s", c)
	}
}

func TestReplayCursorHidesLaterRows(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{Title: "run.gputop", Replay: true}, 160, 50)
	if m.tl.cursor(0) != st.Start() {
		t.Fatalf("a replay starts at the beginning")
	}
	out := screen(m)
	if strings.Contains(out, "Training start") || !strings.Contains(out, "none yet") {
		t.Errorf("at the start no row may show yet:\n%s", out)
	}
	// 10% of the 1m window per step: 6 s, 12 s
	m = send(t, m, press("right", "right")...)
	tbl := ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "Training start") || strings.Contains(tbl, "Epoch 5") {
		t.Errorf("at 12 s only Training start (10 s) may show:\n%s", tbl)
	}
	if !strings.Contains(screen(m), "cursor 0:00:12.0 / 0:01:30.0") {
		t.Errorf("the cursor time should show in the title")
	}
	if strings.Contains(screen(m), "still held") {
		t.Errorf("no verdict before the end rows")
	}
	m = send(t, m, press("end")...)
	out = screen(m)
	for _, l := range []string{"Epoch 5", "Epoch 10", "Training end", "After cleanup", "✗ After cleanup: 1.25 GiB still held: model1"} {
		if !strings.Contains(out, l) {
			t.Errorf("at the end %q should show", l)
		}
	}
	// speed keys and play state
	m = send(t, m, press("home", "space", "]", "]")...)
	if !strings.Contains(screen(m), "replay ▶ 4x") {
		t.Errorf("] twice should play at 4x:\n%s", strings.SplitN(screen(m), "\n", 2)[0])
	}
	// the cursor plays with the clock
	wall := fixtureNow
	m.opt.Now = func() time.Time { return wall }
	m = send(t, m, tickMsg(wall))
	wall = wall.Add(3 * time.Second) // 12 s of recording at 4x
	m = send(t, m, tickMsg(wall))
	if got := time.Duration(m.tl.cursor(0) - st.Start()); got != 12*time.Second {
		t.Errorf("3 s at 4x moved the cursor to %v, want 12s", got)
	}
	if !strings.Contains(ansi.Strip(m.table.View()), "Training start") {
		t.Errorf("rows should appear as the cursor passes them")
	}
	m = send(t, m, press("space")...)
	if !strings.Contains(screen(m), "❚❚ paused") {
		t.Errorf("space should pause the replay")
	}
}

func TestZoomPauseAndWindow(t *testing.T) {
	st := newFixture()
	now := fixtureNow
	m := newModel(t, st, Options{Now: func() time.Time { return now }}, 160, 50)
	if !strings.Contains(screen(m), "window 1m") {
		t.Fatal("default window is 1m")
	}
	m = send(t, m, press("+")...)
	if d := time.Duration(m.chart.data.To - m.chart.data.From); !strings.Contains(screen(m), "window 30s") || d > 30*time.Second || d < 30*time.Second-time.Millisecond {
		t.Errorf("+ should zoom in to 30s")
	}
	m = send(t, m, press("-", "-", "-", "-", "-", "-")...)
	if !strings.Contains(screen(m), "window whole run") || m.chart.data.From != st.Start() {
		t.Errorf("- to the end should show the whole run from its start")
	}
	m = send(t, m, press("+", "+", "+", "+")...) // 1m
	m = send(t, m, press("space")...)
	to := m.chart.data.To
	now = now.Add(10 * time.Second)
	m = send(t, m, tickMsg(now))
	if m.chart.data.To != to || !strings.Contains(screen(m), "paused") {
		t.Errorf("a paused window must not follow the clock")
	}
	m = send(t, m, press("space")...)
	m = send(t, m, tickMsg(now))
	if m.chart.data.To <= to {
		t.Errorf("resumed, the window should follow the clock again")
	}
}

func TestHoldersRequestAndAnswer(t *testing.T) {
	st := newFixture()
	var asked []int
	now := fixtureNow
	m := newModel(t, st, Options{Now: func() time.Time { return now },
		RequestHolders: func(pid int) error { asked = append(asked, pid); return nil }}, 160, 50)
	m = send(t, m, press("h")...)
	if len(asked) != 1 || asked[0] != fixPID {
		t.Fatalf("h on the attached process should ask it for holders, asked %v", asked)
	}
	if !strings.Contains(ansi.Strip(m.holders.View()), fmt.Sprintf("asking pid %d…", fixPID)) {
		t.Errorf("the pane should say it is asking:\n%s", ansi.Strip(m.holders.View()))
	}
	// the old report stays visible while waiting
	if !strings.Contains(ansi.Strip(m.holders.View()), "model1") {
		t.Errorf("the previous report should stay on screen while asking")
	}
	now = now.Add(time.Second)
	st.AgentHolders(fixPID, wire.Holders{Type: wire.TypeHolders, T: now.UnixNano(), ID: 2, Dev: 0, Total: 64 * mib,
		Groups: []wire.HolderGroup{{Kind: "ipython_history", Name: "Out[12]", Bytes: 64 * mib, Tensors: 1, Hint: "%gpucleanup drops output history"}}})
	m = send(t, m, tickMsg(now))
	h := ansi.Strip(m.holders.View())
	if strings.Contains(h, "asking") || !strings.Contains(h, "Out[12]") || strings.Contains(h, "model1") {
		t.Errorf("the newer report should replace the wait:\n%s", h)
	}
	m = send(t, m, press("h")...)
	if m.layout().holders != 0 {
		t.Errorf("h again should close the pane")
	}

	// a request that cannot be sent is an error in the status line
	m = newModel(t, newFixture(), Options{RequestHolders: func(int) error { return errors.New("agent socket closed") }}, 160, 50)
	m = send(t, m, press("h")...)
	if !strings.Contains(screen(m), "cannot ask pid 4242 for holders: agent socket closed") {
		t.Errorf("a failed request should be reported:\n%s", screen(m))
	}
	if pid, _ := m.holders.Waiting(); pid != 0 {
		t.Errorf("a failed request should not keep waiting")
	}
	// no agent server: the pane says why instead of asking
	m = newModel(t, newFixture(), Options{}, 160, 50)
	m = send(t, m, press("up", "h")...)
	if !strings.Contains(ansi.Strip(m.holders.View()), "pid 777 has no agent") {
		t.Errorf("holders of a process without an agent should say why:\n%s", ansi.Strip(m.holders.View()))
	}
}

func TestHoldersAnswerLate(t *testing.T) {
	now := fixtureNow
	m := newModel(t, newFixture(), Options{Now: func() time.Time { return now }, RequestHolders: func(int) error { return nil }}, 160, 50)
	m = send(t, m, press("h")...)
	now = now.Add(holdersTimeout + time.Second)
	m = send(t, m, tickMsg(now))
	if !strings.Contains(screen(m), "no answer from pid 4242") {
		t.Errorf("a wait past the timeout should say so:\n%s", ansi.Strip(m.holders.View()))
	}
}

// An end row's verdict comes from what holds the memory, stays under the
// table whatever rows come after it, and is its own process's: with two
// processes on one GPU the table says whose each row is, and each
// process's deltas and verdict are its own.
func TestVerdictsStayAndArePerProcess(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	for _, pid := range []int{5, 6} {
		st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: pid, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}, T: at(0)})
	}
	kept := wire.HolderGroup{Kind: "variable", Name: "kept", Bytes: 100 * mib, Tensors: 1, Examples: []string{"float32[26214400]"},
		Hint: "del kept; gputop.cleanup()"}
	mark := func(pid int, sec int, label string, alloc uint64, h *wire.Held) {
		t := at(time.Duration(sec) * time.Second)
		st.AddNVML(0, t, 1*gib, 0)
		st.AgentSample(pid, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: alloc, Reserved: alloc, Peak: alloc})
		st.AgentMark(pid, wire.Mark{Type: wire.TypeMark, T: t, Label: label,
			Devs: []wire.DevStats{{Dev: 0, Allocated: alloc, Reserved: alloc, Peak: alloc, Held: h}}})
	}
	// pid 5: its baseline taken with the model on the GPU (400 MiB), the
	// model deleted, 100 MiB kept: below the baseline, and still a leak
	mark(5, 1, "Training start", 400*mib, nil)
	mark(6, 1, "Training start", 0, nil)
	mark(5, 2, "After cleanup", 100*mib, &wire.Held{T: at(2 * time.Second), Allocated: 100 * mib, Python: 100 * mib, Top: []wire.HolderGroup{kept}})
	// pid 6: only the cuBLAS workspaces are left
	mark(6, 3, "After cleanup", 65*mib, &wire.Held{T: at(3 * time.Second), Allocated: 65 * mib, Internal: 65 * mib, Workspaces: 3})
	m := newModel(t, st, Options{Now: func() time.Time { return time.Unix(0, at(4*time.Second)) }}, 160, 40)
	tbl := ansi.Strip(m.table.View())
	for _, w := range []string{
		"✗ pid 5, After cleanup: 100.0 MiB still held: kept (1 tensor float32[26214400]): del kept; gputop.cleanup() [holders walk]",
		"✓ pid 6, After cleanup: nothing of yours holds CUDA memory (65.0 MiB cuBLAS workspaces, not a leak: gputop.cleanup() frees them)",
		`vs "Training start": -300.00 MiB allocated (torch)`, "PID",
	} {
		if !strings.Contains(strings.Join(strings.Fields(tbl), " "), strings.Join(strings.Fields(w), " ")) {
			t.Errorf("want %q:\n%s", w, tbl)
		}
	}
	// each process's delta is against its own rows
	for _, l := range strings.Split(tbl, "\n") {
		if strings.HasPrefix(l, "After cleanup") && strings.Contains(l, " 5 ") && !strings.Contains(l, "-300.00") {
			t.Errorf("pid 5's delta is not against its own start: %q", l)
		}
		if strings.HasPrefix(l, "After cleanup") && strings.Contains(l, " 6 ") && !strings.Contains(l, "+65.00") {
			t.Errorf("pid 6's delta is not against its own start: %q", l)
		}
	}
	// rows after the end rows: the verdicts stay
	m = send(t, m, press("s")...)
	m = send(t, m, press("enter")...)
	st.AgentMark(5, wire.Mark{Type: wire.TypeMark, T: at(3500 * time.Millisecond), Label: "Epoch 1",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Reserved: 1, Peak: 1}}})
	m = send(t, m, tickMsg(time.Unix(0, at(4*time.Second))))
	tbl = ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "snapshot 5") || !strings.Contains(tbl, "✗ pid 5, After cleanup") || !strings.Contains(tbl, "✓ pid 6, After cleanup") {
		t.Errorf("later rows hid the verdicts:\n%s", tbl)
	}
	// the other GPU's table holds none of these rows
	m = send(t, m, press("d")...)
	if tbl := ansi.Strip(m.table.View()); strings.Contains(tbl, "After cleanup") {
		t.Errorf("GPU 1's table shows GPU 0's rows:\n%s", tbl)
	}
}

// tab gives the rows the focus (the newest selected), ↑ selects
// earlier rows: the table scrolls to the selection, and an end row that is
// not the latest shows its verdict too.
func TestSelectedRowShowsItsVerdict(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 160, 50)
	m = send(t, m, press("tab", "up", "up")...) // After cleanup, manual check, Training end
	tbl := ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "selected row: Training end: 2.50 GiB still held: optimizer (Adam)") {
		t.Errorf("the selected end row's verdict should show:\n%s", tbl)
	}
	if !strings.Contains(tbl, "✗ After cleanup: 1.25 GiB still held") {
		t.Errorf("the latest end row's verdict must stay:\n%s", tbl)
	}
	// a short pane scrolls to the selection
	m = newModel(t, st, Options{}, 80, 24)
	m = send(t, m, press("tab", "g")...) // the label column is cut to fit at 80
	if tbl := ansi.Strip(m.table.View()); !strings.HasPrefix(strings.Split(tbl, "\n")[1], "Training sta") {
		t.Errorf("selecting the first row should scroll to it:\n%s", tbl)
	}
}

// c takes an end row: the rows of the selected GPU are end rows, each
// process's agent is asked for a holders walk, and the verdict waits for
// its answer.
func TestEndRowKeyAsksTheAgent(t *testing.T) {
	st := newFixture()
	var asked []int
	in := ingest.New(st)
	in.SetAsker(func(pid, dev int) error { asked = append(asked, pid, dev); return nil })
	m := newModelIn(t, in, Options{}, 160, 50)
	m = send(t, m, press("c")...)
	if !strings.Contains(screen(m), "After cleanup") {
		t.Fatalf("c should open the prompt prefilled:\n%s", screen(m))
	}
	m = send(t, m, press("enter")...)
	if len(asked) != 2 || asked[0] != fixPID || asked[1] != 0 {
		t.Fatalf("asked %v", asked)
	}
	tbl := ansi.Strip(m.table.View())
	if !strings.Contains(tbl, "… pid 4242, After cleanup: waiting for its agent's holders walk") {
		t.Errorf("the verdict should wait for the walk:\n%s", tbl)
	}
	// the process other-job (no agent) gets its NVML verdict
	if !strings.Contains(tbl, "? After cleanup: pid 777 (other-job) 300.0 MiB still uses this GPU (NVML") {
		t.Errorf("the process without an agent should get an NVML verdict:\n%s", tbl)
	}
	st.AgentHolders(fixPID, wire.Holders{Type: wire.TypeHolders, T: fixtureNow.UnixNano() + 1, Dev: 0, Groups: []wire.HolderGroup{},
		Held: &wire.Held{T: fixtureNow.UnixNano() + 1, Allocated: 1*gib + 256*mib + 256*kib, Internal: 1*gib + 256*mib + 256*kib}})
	m = send(t, m, tickMsg(fixtureNow))
	if tbl := ansi.Strip(m.table.View()); !strings.Contains(tbl, "✓ pid 4242, After cleanup: nothing of yours holds CUDA memory") {
		t.Errorf("the answer should give the verdict:\n%s", tbl)
	}
}

func TestStatusShowsLoadErrorThenLogs(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{LoadErr: "run.gputop: line 12 (byte 4096): unexpected end of JSON input"}, 160, 50)
	if !strings.Contains(screen(m), "byte 4096") {
		t.Fatalf("the load error should be on screen at start")
	}
	logOf(st).Add("agent pid 9 closed: line over 1 MiB")
	m = send(t, m, tickMsg(fixtureNow))
	if !strings.Contains(screen(m), "agent pid 9 closed: line over 1 MiB") {
		t.Errorf("a new log line should reach the status line")
	}
}

func TestIdleFramesCostNothing(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 160, 50)
	m = send(t, m, tickMsg(fixtureNow))
	v := m.version
	for range 5 {
		m = send(t, m, tickMsg(fixtureNow))
	}
	if m.version != v {
		t.Errorf("ticks with no new data and no clock change redrew the screen (%d -> %d)", v, m.version)
	}
	// a new value waits until valueInterval has passed since the last redraw
	st.AddNVML(0, fixtureNow.UnixNano(), 3*gib, 0)
	m = send(t, m, tickMsg(fixtureNow))
	if m.version != v {
		t.Errorf("a new value redrew at once; values should wait for valueInterval")
	}
	later := fixtureNow.Add(maxValueInterval)
	m.opt.Now = func() time.Time { return later }
	m = send(t, m, tickMsg(later))
	if m.version == v || !strings.Contains(ansi.Strip(m.header.View()), "3.00 GiB") {
		t.Errorf("after valueInterval the new value should be drawn")
	}
	// a new row (from the agent, a shell) is drawn at the next tick
	v = m.version
	st.TakeSnapshot("from a shell", 0, later.UnixNano(), "cli", nil, false)
	m = send(t, m, tickMsg(later))
	if m.version == v || !strings.Contains(screen(m), "from a shell") {
		t.Errorf("a new row should show at the next tick, not after valueInterval")
	}
}

func TestManyProcessesScrollWithSelection(t *testing.T) {
	st := newFixture()
	var procs []wire.Proc
	for i := 1; i <= 12; i++ {
		procs = append(procs, wire.Proc{PID: 1000 + i, Name: fmt.Sprintf("worker-%d", i), Used: uint64(i) * 100 * mib})
	}
	st.SetProcs(0, fixtureNow.UnixNano(), procs)
	m := newModel(t, st, Options{}, 160, 50)
	m = send(t, m, press("down", "down", "down", "down", "down", "down", "down", "down", "down", "down", "down")...)
	p := ansi.Strip(m.procs.View())
	lines := strings.Split(p, "\n")
	if len(lines) != m.layout().procs {
		t.Fatalf("the pane has %d lines, want its height %d", len(lines), m.layout().procs)
	}
	if !strings.Contains(p, "worker-12") || !strings.Contains(p, "9-13 of 13 processes") {
		t.Errorf("the selected last process should be in view with a count line:\n%s", p)
	}
}

func TestEmptyStore(t *testing.T) {
	for _, replay := range []bool{false, true} {
		st := store.New(store.DefaultOptions())
		m := newModel(t, st, Options{Replay: replay}, 100, 30)
		m = send(t, m, press("s", "enter", "h", "tab", "up", "-", "right", "e", "space")...)
		out := screen(m)
		checkBox(t, m.View().Content, 100, 30)
		if len(st.Rows()) != 0 {
			t.Errorf("a snapshot of no GPU was recorded")
		}
		clock := map[bool]string{false: "● live 0 min", true: "0:00:00"}[replay]
		if !strings.Contains(out, "no GPU known yet") || !strings.Contains(out, clock) {
			t.Errorf("an empty store should say it waits for data:\n%s", out)
		}
		// data arriving later shows up
		st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
		st.AddNVML(0, fixtureNow.UnixNano(), 2*gib, 0)
		m = send(t, m, tickMsg(fixtureNow))
		if !strings.Contains(screen(m), "NVIDIA H200") {
			t.Errorf("a device added later should appear")
		}
	}
}

func TestOOMAndKilledProcess(t *testing.T) {
	st := newFixture()
	st.AgentOOM(fixPID, wire.OOM{Type: wire.TypeOOM, T: at(85 * time.Second), Dev: 0, Requested: 80 * gib, Allocated: 3 * gib, Reserved: 4 * gib, Peak: 3 * gib})
	st.AgentEnded(fixPID, at(88*time.Second), false, "connection reset")
	m := newModel(t, st, Options{}, 160, 50)
	chart := ansi.Strip(m.chart.View())
	if !strings.Contains(chart, "OOM") || !strings.Contains(chart, "ended") || !strings.Contains(chart, "┃") {
		t.Errorf("the OOM and the end of the process should be chart markers:\n%s", chart)
	}
	procs := ansi.Strip(m.procs.View())
	var row string
	for _, l := range strings.Split(procs, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "4242") {
			row = l
		}
	}
	if !strings.Contains(row, "ended (killed)") || !strings.HasSuffix(strings.TrimSpace(row), "1") {
		t.Errorf("the killed process should show as ended with 1 OOM: %q", row)
	}
	if !strings.Contains(ansi.Strip(m.table.View()), "OOM") {
		t.Errorf("the OOM should be a row of the summary")
	}
	// its history stays: the chart still has its torch series
	if !strings.Contains(chart, "allocated (torch)") {
		t.Errorf("an ended process keeps its series:\n%s", chart)
	}
}

// An OOM is explained under the table: what was asked for, where the memory
// was, each figure with its source, and the cause the figures point to.
func TestOOMExplained(t *testing.T) {
	for _, c := range []struct {
		name string
		oom  wire.OOM
		want []string
	}{
		{"live tensors", wire.OOM{Requested: 80 * gib, Free: 1 * gib, Allocated: 3 * gib, Reserved: 4 * gib},
			[]string{"✗ OOM at 0:01:25.0 in pid 4242: asked for 80.00 GiB, 1.00 GiB free on the GPU (CUDA).",
				"torch held 3.00 GiB in tensors (allocated) and 1.00 GiB cached but unused (reserved − allocated).",
				"Live tensors fill the GPU: holders (h in gputop, gputop.holders() in Python) names what keeps them"}},
		{"fragmentation", wire.OOM{Requested: 512 * mib, Free: 100 * mib, Allocated: 1 * gib, Reserved: 1536 * mib},
			[]string{"asked for 512.0 MiB, 100.0 MiB free on the GPU (CUDA).",
				"and 512.0 MiB cached but unused",
				"The cache had room but no free block that large: fragmentation. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."}},
		{"larger than the GPU", wire.OOM{Requested: 200 * gib, Free: 130 * gib, Allocated: 1 * gib, Reserved: 2 * gib},
			[]string{"asked for 200.0 GiB, 130.0 GiB free on the GPU (CUDA).",
				"That is more than the whole GPU (140.4 GiB): the size itself is wrong, or the work must be split."}},
		{"outside torch", wire.OOM{Requested: 2 * gib, Allocated: 256 * mib, Reserved: 512 * mib},
			// NVML used at 0:01:25 in the fixture: 512 MiB + 500 MiB context + 1536 MiB reserved
			[]string{"asked for 2.00 GiB.",
				"on the whole GPU 1.99 GiB outside its cache (NVML device used − reserved: CUDA contexts, other processes).",
				"More is used outside this process's tensors than by them: other processes or the CUDA context."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFixture()
			o := c.oom
			o.Type, o.T, o.Dev = wire.TypeOOM, at(85*time.Second), 0
			st.AgentOOM(fixPID, o)
			m := newModel(t, st, Options{}, 160, 50)
			text := strings.Join(strings.Fields(ansi.Strip(m.table.View())), " ")
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("want %q in the table pane:\n%s", w, ansi.Strip(m.table.View()))
				}
			}
			// at 80 columns it wraps, never cuts: the cause is still all there
			m = newModel(t, st, Options{}, 80, 50)
			narrow := ansi.Strip(m.table.View())
			checkBox(t, narrow, 80, m.table.h)
			if last := c.want[len(c.want)-1]; !strings.Contains(strings.Join(strings.Fields(narrow), " "), last) {
				t.Errorf("at 80 columns, want %q:\n%s", last, narrow)
			}
			// small screens keep their box; at 80x24 the rows share the pane
			// with the explanation's start, the cause first
			for _, sz := range [][2]int{{40, 10}, {60, 16}, {80, 24}} {
				m = newModel(t, st, Options{}, sz[0], sz[1])
				checkBox(t, m.View().Content, sz[0], sz[1])
			}
			if scr := screen(m); !strings.Contains(scr, "✗ OOM at 0:01:25.0") || !strings.Contains(scr, "After cleanup") {
				t.Errorf("80x24: want the latest rows and the OOM's first lines:\n%s", scr)
			}
		})
	}
	// no OOM, no explanation
	m := newModel(t, newFixture(), Options{}, 160, 50)
	if strings.Contains(ansi.Strip(m.table.View()), "✗ OOM") {
		t.Error("an OOM explanation without an OOM")
	}
}

// Value-only redraws are spaced by the window: the chart moves about as far
// at each redraw at every zoom.
func TestValueIntervalFollowsZoom(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 160, 50)
	now, start := fixtureNow.UnixNano(), st.Start()
	for _, c := range []struct {
		zoom time.Duration
		want time.Duration
	}{{10 * time.Second, 250 * time.Millisecond}, {30 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second}, {time.Hour, time.Second}} {
		for i, z := range zooms {
			if z == c.zoom {
				m.tl.zoom = i
			}
		}
		if got := m.valueInterval(now, start); got != c.want {
			t.Errorf("window %v: value redraws every %v, want %v", c.zoom, got, c.want)
		}
	}
}

// An agent that said its rank shows it in the process pane, before its
// command line.
func TestProcsShowRank(t *testing.T) {
	st := newFixture()
	h := st.Agents()[0].Hello
	h.Rank, h.WorldSize = "3", "8"
	st.AgentHello(h)
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	procs := ansi.Strip(m.procs.View())
	if !strings.Contains(procs, "rank 3/8  ") {
		t.Errorf("the process pane should show rank 3/8:\n%s", procs)
	}
}
