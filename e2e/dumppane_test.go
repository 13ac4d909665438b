package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// writeDumpRecording writes a real recording of a two-host view: this
// machine's GPU, whose agent (pid 42) marked "Epoch 1" with local as its
// memory dump, and gpu-b's, whose agent marked "Epoch 2" with remote (a
// path on gpu-b) as its dump; 5 s of NVML samples on each.
func writeDumpRecording(t *testing.T, path, local, remote string) {
	t.Helper()
	in, done := testRecording(t, path, 100, "GPU-here", 80<<30)
	in.Apply(0, wire.Host{Type: wire.TypeHost, ID: 1, Name: "gpu-b", Up: true, T: base})
	remoteDev := in.HostDevice(store.Device{UUID: "GPU-there", Name: "Remote GPU", Total: 80 << 30, Source: "nvml", Host: "gpu-b"})
	for i := 0; i < 500; i++ {
		t := base + int64(i)*int64(10*time.Millisecond)
		in.NVML(0, t, 1234*mib, 512*mib)
		in.NVML(remoteDev, t, 4321*mib, 512*mib)
	}
	there := store.HostPID(1, 42)
	for _, a := range []struct {
		pid        int
		uuid, path string
		label      string
	}{{42, "GPU-here", local, "Epoch 1"}, {there, "GPU-there", remote, "Epoch 2"}} {
		in.Apply(a.pid, wire.Hello{Type: wire.TypeHello, V: 1, PID: a.pid, T: base, Devices: []wire.AgentDevice{{Index: 0, UUID: a.uuid}}})
		in.Apply(a.pid, wire.Mark{Type: wire.TypeMark, T: base + int64(time.Second), Label: a.label,
			Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 20}}, Dump: &wire.Dump{Path: a.path}})
	}
	done()
}

// Pressing I on a row whose dump is a 13-byte pickle declaring a 100 GiB
// frame (it once killed the TUI with an unrecoverable out-of-memory,
// leaving the terminal on the alternate screen and no CSV) shows why it
// cannot be read; a row from a remote host is not read here, though a
// file of its path exists here; q still writes the CSV.
func TestDumpPaneHostileAndRemote(t *testing.T) {
	dir := t.TempDir()
	hostile, err := filepath.Abs(filepath.Join("..", "testdata", "memdump", "hostile", "frame-100g.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(filepath.Join("..", "testdata", "memdump", "oom.pickle"))
	rec := filepath.Join(dir, "run.gputop")
	writeDumpRecording(t, rec, hostile, here)
	out := filepath.Join(dir, "summary.csv")
	tm := startTerm(t, 160, 50, "--replay", rec, "--csv", out)
	tm.waitFor("Epoch 1")
	tm.keys("I")
	tm.waitFor("truncated at byte 13: FRAME at byte 2 declares 107374182400 bytes")
	tm.keys("I", "d")
	tm.waitFor("Epoch 2")
	tm.keys("I")
	scr := tm.waitFor("this dump was written on gpu-b, not on this machine")
	if strings.Contains(scr, "torch memory dump") {
		t.Errorf("the remote row's path was read here:\n%s", scr)
	}
	tm.keys("q")
	waitFile(t, out)
	tm.waitExit()
	recs := readCSV(t, out)
	var labels []string
	for _, r := range recs[1:] {
		labels = append(labels, r[0])
	}
	if strings.Join(labels, ",") != "Epoch 1,Epoch 2" {
		t.Errorf("CSV rows %q; want Epoch 1 and Epoch 2", labels)
	}
}
