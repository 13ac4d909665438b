package ui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// twinStore has three rows of one process on one device at one time, all
// labelled "step", told apart by their allocated bytes (1, 2, 3 MiB).
func twinStore(opt store.Options) *store.Store {
	st := store.New(opt)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "g", Total: 1 << 30, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 9, T: fixtureNow.UnixNano() - 1e9,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	for i := range 3 {
		st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: fixtureNow.UnixNano() - 5e8, Label: "step",
			Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i+1) << 20}}})
	}
	return st
}

func mibs(st *store.Store) string {
	var out []string
	for _, r := range st.Rows() {
		out = append(out, fmt.Sprintf("%s=%d", r.Label, *r.Allocated>>20))
	}
	return strings.Join(out, ",")
}

// x and r act on the row selected, not on the first row that shares its
// time, label, process and GPU.
func TestEditsActOnTheSelectedTwin(t *testing.T) {
	st := twinStore(store.DefaultOptions())
	m := newModel(t, st, Options{}, 160, 50)
	m = send(t, m, press("tab", "up")...) // the second
	if !strings.Contains(ansi.Strip(m.table.View()), "selected row 2 of 3: step") {
		t.Fatalf("not on the second row:\n%s", ansi.Strip(m.table.View()))
	}
	m = send(t, m, press("x", "enter")...)
	if got := mibs(st); got != "step=1,step=3" {
		t.Fatalf("after deleting the second: %s, want step=1,step=3", got)
	}
	m = send(t, m, press("down", "r")...) // the third
	m = send(t, m, press("ctrl+u")...)
	m = send(t, m, typeText("third")...)
	m = send(t, m, press("enter")...)
	if got := mibs(st); got != "step=1,third=3" {
		t.Fatalf("after renaming the third: %s, want step=1,third=3", got)
	}
	if !strings.Contains(ansi.Strip(m.table.View()), "selected row 2 of 2: third") {
		t.Errorf("the renamed row should stay selected:\n%s", ansi.Strip(m.table.View()))
	}
}

// The summary pane says what the bounds on rows left out.
func TestSummaryPaneSaysWhatBoundsLeftOut(t *testing.T) {
	opt := store.DefaultOptions()
	opt.MaxRows = 16
	st := twinStore(opt)
	for i := range 40 {
		st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: fixtureNow.UnixNano() - 4e8 + int64(i), Label: strings.Repeat("x", 300),
			Devs: []wire.DevStats{{Dev: 0, Allocated: 1}}})
	}
	m := newModel(t, st, Options{}, 200, 50)
	scr := screen(m)
	b := st.Bounds()
	for _, want := range []string{
		fmt.Sprintf("%d older rows dropped (at most 16 kept; not in the CSV, a recording has them)", b.RowsDropped),
		"40 labels cut to 256 bytes (…)",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the pane does not say %q:\n%s", want, scr)
		}
	}
}
