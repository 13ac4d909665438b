package ui

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// dumpStore is a GPU with an agent (pid 42) whose mark named path as its
// memory dump.
func dumpStore(path string) *store.Store {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 42, T: at(0), Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}})
	st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: at(time.Second), Label: "Epoch 1",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 20}}, Dump: &wire.Dump{Path: path}})
	return st
}

// update is one Update, the command it returns not run.
func update(m Model, msg tea.Msg) (Model, tea.Cmd) {
	nm, cmd := m.Update(msg)
	return nm.(Model), cmd
}

// finish runs a dump read to its message, failing when it goes on past
// limit.
func finish(t *testing.T, cmd tea.Cmd, limit time.Duration) dumpReadMsg {
	t.Helper()
	if cmd == nil {
		t.Fatal("no read started")
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	select {
	case msg := <-done:
		return msg.(dumpReadMsg)
	case <-time.After(limit):
		t.Fatalf("the read went on for %v", limit)
	}
	return dumpReadMsg{}
}

// One read at a time: closing the pane cancels the read in flight, a
// read superseded by another is cancelled and its answer ignored, and
// quitting cancels the read too. The file is 82 KB of shared references
// that once took hours to sum up.
func TestDumpReadCancelled(t *testing.T) {
	shared := filepath.Join("..", "testdata", "memdump", "hostile", "shared-refs.pickle")
	m := newModel(t, dumpStore(shared), Options{}, 120, 40)

	m, first := update(m, keyMsg("I"))
	if !strings.Contains(screen(m), "reading…") {
		t.Fatalf("no reading… in the pane:\n%s", screen(m))
	}
	m, _ = update(m, keyMsg("I")) // closes it
	msg := finish(t, first, 10*time.Second)
	if !errors.Is(msg.err, context.Canceled) {
		t.Errorf("the read after the pane closed: %v; want it cancelled", msg.err)
	}
	m = send(t, m, msg)
	if strings.Contains(screen(m), "MEMORY DUMP") {
		t.Errorf("a cancelled read opened the pane:\n%s", screen(m))
	}

	// superseded: the first answer is ignored, the second shown
	m, first = update(m, keyMsg("I"))
	m, _ = update(m, keyMsg("I"))
	m, second := update(m, keyMsg("I"))
	m = send(t, m, finish(t, first, 10*time.Second))
	if !strings.Contains(screen(m), "reading…") {
		t.Errorf("the superseded read's answer was shown:\n%s", screen(m))
	}
	m = send(t, m, finish(t, second, 30*time.Second))
	if scr := screen(m); !strings.Contains(scr, "over the reader's budget of 1377616 visits") {
		t.Errorf("the budget's message is not in the pane:\n%s", scr)
	}

	// quitting cancels the read in flight
	m, _ = update(m, keyMsg("I"))
	m, last := update(m, keyMsg("I"))
	m, _ = update(m, keyMsg("q"))
	if msg := finish(t, last, 10*time.Second); !errors.Is(msg.err, context.Canceled) {
		t.Errorf("the read after quitting: %v; want it cancelled", msg.err)
	}
}

// A row from a remote host names a path on that host: the pane says so
// and reads nothing here, though a file of that name exists here.
func TestRemoteDumpNotReadHere(t *testing.T) {
	here := filepath.Join("..", "testdata", "memdump", "oom.pickle")
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	st.SetHost(store.Host{ID: 1, Name: "gpu-b", Up: true})
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H200", Total: h200, Source: "nvml", Host: "gpu-b"})
	pid := store.HostPID(1, 42)
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: pid, T: at(0), Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-bbbb"}}})
	st.AgentMark(pid, wire.Mark{Type: wire.TypeMark, T: at(time.Second), Label: "Epoch 1",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 20}}, Dump: &wire.Dump{Path: here}})
	m := newModel(t, st, Options{}, 120, 40)
	m = send(t, m, keyMsg("d")) // the remote GPU
	m, cmd := update(m, keyMsg("I"))
	if cmd != nil {
		t.Error("a read was started for a remote host's path")
	}
	if scr := screen(m); !strings.Contains(scr, "this dump was written on gpu-b, not on this machine") ||
		strings.Contains(scr, "torch memory dump") {
		t.Errorf("the pane does not say where the dump is:\n%s", scr)
	}
}
