package ui

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// -update rewrites the golden files in testdata/. teatest's golden package
// already defines the flag; define it only when nothing else did.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// t0 is the fixture's first sample; every time in the fixture is fixed.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

func at(d time.Duration) int64 { return t0 + int64(d) }

// fixtureNow is the fixture's "now": 90 s into the run.
var fixtureNow = time.Unix(0, at(90*time.Second))

const (
	fixPID   = 4242
	otherPID = 777
	h200     = 150754820096 // bytes NVML reports for an H200
)

// fillFixture builds a store like a real session: two H200s (the second
// one lost at 40 s), an NVML-only process, and a training process with an
// agent that marks Training start / Epoch 5 / Epoch 10 / Training end /
// After cleanup, leaks 1.25 GiB, and answers a holders request. NVML is
// sampled at 100 Hz, plus a 5 ms spike of 4 GiB sampled at 1 kHz at 30 s.
func fillFixture(st *store.Store) {
	log := logOf(st)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml", Rate: 998})
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H200", Total: h200, Source: "nvml", Rate: 997})
	log.Add("nvml: 2 devices, sampling at 1000/s")

	var alloc, resv, peak uint64
	agent := false
	ctx := uint64(0) // CUDA context of the training process, seen by NVML
	const base = 512 * mib
	model1 := wire.HolderGroup{Kind: "parameters", Name: "model1", Bytes: 1 * gib, Tensors: 8,
		Examples: []string{"float32[4096, 4096]", "float32[4096]"},
		Hint:     "model1 is still referenced: del model1 (and any other name bound to it)"}
	losses := wire.HolderGroup{Kind: "container", Name: "losses", Bytes: 256 * mib, Tensors: 10, Examples: []string{"float32[]"},
		Hint: "losses holds 10 loss tensors with grad_fn: append loss.item()"}
	// what the agent's walk finds at the end rows, as it sends it
	held := map[string]*wire.Held{
		"Training end": {Python: 2*gib + 512*mib, Top: []wire.HolderGroup{
			{Kind: "optimizer_state", Name: "optimizer (Adam)", Bytes: 1*gib + 256*mib, Tensors: 16,
				Hint: "del optimizer; gputop.cleanup()"}, model1, losses}},
		"After cleanup": {Python: 1*gib + 256*mib, Unaccounted: 256 * kib, Top: []wire.HolderGroup{model1, losses}},
	}
	mark := func(t int64, label string) {
		ds := wire.DevStats{Dev: 0, Allocated: alloc, Reserved: resv, Peak: peak}
		if h := held[label]; h != nil {
			h.T, h.Allocated = t, alloc
			ds.Held = h
		}
		st.AgentMark(fixPID, wire.Mark{Type: wire.TypeMark, T: t, Label: label, Devs: []wire.DevStats{ds}})
	}
	for ms := 0; ms <= 90_000; ms += 10 {
		t := at(time.Duration(ms) * time.Millisecond)
		switch {
		case ms == 5_000:
			st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: fixPID, Host: "h200",
				Argv: []string{"/usr/bin/python3", "train.py", "--epochs", "10"}, Torch: "2.11.0",
				Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200}}, T: t})
			agent, ctx = true, 500*mib
			alloc, resv, peak = 256*kib, 2*mib, 256*kib
		case ms == 10_000:
			mark(t, "Training start")
		case ms > 10_000 && ms < 60_000:
			// weights + optimizer state, then activations that come and go
			alloc = 2*gib + uint64(ms%1000)*mib
			resv = 6 * gib
			peak = max(peak, alloc)
		case ms == 60_000:
			alloc, resv = 2*gib+512*mib, 6*gib
			mark(t, "Training end")
		case ms == 65_000:
			// cleanup: the optimizer went, the model did not
			alloc, resv = 1*gib+256*mib+256*kib, 1536*mib
		case ms == 66_000:
			mark(t, "After cleanup")
		}
		if ms == 35_000 {
			mark(t, "Epoch 5")
		}
		if ms == 55_000 {
			mark(t, "Epoch 10")
		}
		used := base + ctx + resv
		st.AddNVML(0, t, used, 300*mib)
		if ms == 30_000 {
			// a 5 ms spike of 4 GiB at 1 kHz, between two 100 Hz samples
			for k := 1; k <= 5; k++ {
				st.AddNVML(0, t+int64(k)*int64(time.Millisecond), used+4*gib, 300*mib)
			}
			st.AddNVML(0, t+6*int64(time.Millisecond), used, 300*mib)
		}
		if ms < 40_000 {
			st.AddNVML(1, t, 600*mib, 300*mib)
		} else if ms == 40_000 {
			st.SetDeviceError(1, t, "GPU is lost")
		}
		if ms%100 == 0 {
			procs := []wire.Proc{{PID: otherPID, Name: "other-job", Used: 300 * mib}}
			if agent {
				procs = append(procs, wire.Proc{PID: fixPID, Name: "python3", Used: ctx + resv})
				st.AgentSample(fixPID, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: alloc, Reserved: resv, Peak: peak})
			}
			st.SetProcs(0, t, procs)
		}
		if ms == 62_000 {
			st.TakeSnapshot("manual check", 0, t, "key", nil, false)
		}
		if ms == 67_000 {
			st.AgentHolders(fixPID, wire.Holders{Type: wire.TypeHolders, T: t, ID: 1, Dev: 0, Total: 1*gib + 256*mib, Skipped: 2, TookMS: 41,
				Groups: []wire.HolderGroup{model1, losses,
					{Kind: "other", Name: "(unreachable from user code)", Bytes: 256 * kib, Tensors: 1},
				}})
		}
	}
	log.Add("agent pid 4242 attached: python3 train.py (torch 2.11.0)")
}

// logOf is the log that goes with a test's store, as main gives the UI the
// log its sources write to.
func logOf(st *store.Store) *logbook.Book {
	logsMu.Lock()
	defer logsMu.Unlock()
	if logs[st] == nil {
		logs[st] = logbook.New()
	}
	return logs[st]
}

var (
	logsMu sync.Mutex
	logs   = map[*store.Store]*logbook.Book{}
)

func newFixture() *store.Store {
	st := store.New(store.DefaultOptions())
	fillFixture(st)
	return st
}

func fixedNow() time.Time { return fixtureNow }

// newModel makes a sized model over st with a fixed clock.
func newModel(t *testing.T, st *store.Store, opt Options, w, h int) Model {
	t.Helper()
	return newModelIn(t, ingest.New(st), opt, w, h)
}

// newModelIn is newModel over an Ingest the test holds (e.g. with a Tap).
func newModelIn(t *testing.T, in *ingest.Ingest, opt Options, w, h int) Model {
	t.Helper()
	if opt.Now == nil {
		opt.Now = fixedNow
	}
	if opt.Log == nil {
		opt.Log = logOf(in.Store())
	}
	m := New(in, opt)
	m = send(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

// send feeds messages through Update and runs the commands they return
// (exports, holders requests) the way the Bubble Tea runtime would. Commands
// that do not finish quickly are timers (frame ticks, cursor blink) and are
// dropped: the tests drive time themselves.
func send(t *testing.T, m Model, msgs ...tea.Msg) Model {
	t.Helper()
	for _, msg := range msgs {
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		for _, out := range runCmd(cmd) {
			m = send(t, m, out)
		}
	}
	return m
}

func runCmd(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- cmd() }()
	select {
	case msg := <-ch:
		switch msg := msg.(type) {
		case tea.BatchMsg:
			var out []tea.Msg
			for _, c := range msg {
				out = append(out, runCmd(c)...)
			}
			return out
		case csvMsg, holdersAskedMsg:
			return []tea.Msg{msg}
		}
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

// press turns key names into key presses.
func press(keys ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range keys {
		out = append(out, keyMsg(k))
	}
	return out
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "home":
		return tea.KeyPressMsg{Code: tea.KeyHome}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(k)
	return tea.KeyPressMsg{Code: r[0], Text: k}
}

// typeText turns a string into one key press per character.
func typeText(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		out = append(out, keyMsg(string(r)))
	}
	return out
}

// screen is the plain text of the whole screen.
func screen(m Model) string { return ansi.Strip(m.View().Content) }

// golden compares got with testdata/name.golden; -update rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -update to create it)", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < max(len(wl), len(gl)); i++ {
			var a, b string
			if i < len(wl) {
				a = wl[i]
			}
			if i < len(gl) {
				b = gl[i]
			}
			if a != b {
				t.Fatalf("%s differs from the golden file at line %d:\nwant: %q\ngot:  %q\n(run go test ./ui -update if the change is intended)", path, i+1, a, b)
			}
		}
	}
}

func stripANSI(s string) string { return ansi.Strip(s) }
