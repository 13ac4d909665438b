package remote

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const tool = "gputop 0.1.0"

// stream is what two hosts' gputops send that would collide if applied as
// they are: the same device index, the same UUID-less numbering, pid 1234.
func stream(t0 int64, uuid string, allocated uint64) []wire.Frame {
	return []wire.Frame{
		wire.Recording{Type: wire.TypeRecording, V: 3, Start: t0, Tool: tool},
		wire.Device{Type: wire.TypeDevice, Index: 0, UUID: uuid, Name: "NVIDIA H200", Total: 1 << 37},
		wire.NVML{Type: wire.TypeNVML, Dev: 0, T0: t0, DT: []int64{0, 1e6}, Used: []int64{1 << 30, 1 << 20}},
		wire.Procs{Type: wire.TypeProcs, T: t0, Dev: 0, Procs: []wire.Proc{{PID: 1234, Name: "python", Used: 1 << 29}}},
		wire.Hello{Type: wire.TypeHello, V: 1, PID: 1234, T: t0, Argv: []string{"train.py"}, Devices: []wire.AgentDevice{{Index: 0, UUID: uuid}}},
		wire.Samples{Type: wire.TypeSamples, PID: 1234, Dev: 0, T0: t0 + 1, DT: []int64{0}, Allocated: []int64{int64(allocated)}, Reserved: []int64{0}, Peak: []int64{0}},
		wire.Row{Type: wire.TypeRow, T: t0 + 2, Label: "Epoch 1", Dev: 0, PID: 1234, Source: "agent"},
	}
}

func applyAll(t *testing.T, c *conn, fs []wire.Frame) {
	t.Helper()
	for _, f := range fs {
		if err := c.apply(f, lineBytes(t, f)); err != nil {
			t.Fatal(err)
		}
	}
}

// lineBytes is the length of f's line in a stream.
func lineBytes(t *testing.T, f wire.Frame) int64 {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) + 1)
}

// Two hosts' pid 1234 on their device 0 stay two processes on two devices,
// each under its host, with its own samples, NVML figures and rows.
func TestHostsKeptApart(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := ingest.New(st)
	// a local GPU first: remote devices come after it
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-local", Name: "local", Source: "nvml"})
	t0 := time.Now().UnixNano()
	a := newConn(New(in, 1, Options{Host: "node1", Tool: tool}))
	b := newConn(New(in, 2, Options{Host: "node2", Tool: tool}))
	applyAll(t, a, stream(t0, "GPU-1", 100))
	applyAll(t, b, stream(t0, "GPU-2", 200))

	devs := st.Devices()
	if len(devs) != 3 || devs[1].Host != "node1" || devs[2].Host != "node2" || devs[0].Host != "" {
		t.Fatalf("devices %+v", devs)
	}
	for i, host := range []string{"node1", "node2"} {
		dev, key := i+1, store.HostPID(i+1, 1234)
		if got := st.PIDLabel(key); got != host+":1234" {
			t.Errorf("label %q", got)
		}
		v, _, ok := st.Latest(store.Key{Dev: dev, PID: key, Metric: store.Allocated})
		if want := uint64(100 * (i + 1)); !ok || v != want {
			t.Errorf("%s allocated %d (%v), want %d", host, v, ok, want)
		}
		if v, _, _ := st.Latest(store.Key{Dev: dev, Metric: store.NVMLUsed}); v != 1<<30+1<<20 {
			t.Errorf("%s NVML used %d", host, v)
		}
		procs, _ := st.Procs(dev)
		if len(procs) != 1 || procs[0].PID != key {
			t.Errorf("%s procs %+v", host, procs)
		}
	}
	if _, _, ok := st.Latest(store.Key{Dev: 0, PID: 1234, Metric: store.Allocated}); ok {
		t.Error("a remote sample landed on the local GPU's pid 1234")
	}
	rows := st.Rows()
	if len(rows) != 2 || rows[0].Dev != 1 || rows[0].PID != store.HostPID(1, 1234) || rows[1].Dev != 2 || rows[1].PID != store.HostPID(2, 1234) {
		t.Fatalf("rows %+v", rows)
	}

	// node1 reconnects: its device keeps its index, nothing new is added
	a2 := newConn(a.s)
	applyAll(t, a2, stream(t0+1e9, "GPU-1", 300))
	if n := len(st.Devices()); n != 3 {
		t.Fatalf("after a reconnection %d devices, want 3", n)
	}
	if v, _, _ := st.Latest(store.Key{Dev: 1, PID: store.HostPID(1, 1234), Metric: store.Allocated}); v != 300 {
		t.Fatalf("after a reconnection allocated %d, want 300", v)
	}
}

// A host down ends its agents with the reason and empties its process
// lists; the other host's stay.
func TestHostDown(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := ingest.New(st)
	t0 := time.Now().UnixNano()
	a := newConn(New(in, 1, Options{Host: "node1", Tool: tool}))
	b := newConn(New(in, 2, Options{Host: "node2", Tool: tool}))
	applyAll(t, a, stream(t0, "GPU-1", 1))
	applyAll(t, b, stream(t0, "GPU-2", 2))
	a.s.down("ssh node1 exited with status 255")
	for _, ag := range st.Agents() {
		host, _ := store.SplitPID(ag.Hello.PID)
		if ag.Connected != (host == 2) {
			t.Errorf("host %d agent connected %v", host, ag.Connected)
		}
	}
	if p, _ := st.Procs(0); len(p) != 0 {
		t.Errorf("node1's process list kept: %+v", p)
	}
	if p, _ := st.Procs(1); len(p) != 1 {
		t.Errorf("node2's process list: %+v", p)
	}
	hs := st.Hosts()
	if hs[0].Up || hs[0].Reason != "ssh node1 exited with status 255" {
		t.Errorf("node1: %+v", hs[0])
	}
}

// A remote gputop of another version is refused, naming the host and both
// versions; a pid no Linux host has ends the connection.
func TestRefused(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := ingest.New(st)
	c := newConn(New(in, 1, Options{Host: "node1", Tool: tool}))
	err := c.apply(wire.Recording{Type: wire.TypeRecording, V: 3, Start: 1, Tool: "gputop 0.2.0"}, 80)
	var ve *versionError
	if !errors.As(err, &ve) || err.Error() != "node1 runs gputop 0.2.0, this is gputop 0.1.0: install the same gputop on both (or point --ssh-gputop at it)" {
		t.Fatalf("got %v", err)
	}
	c = newConn(c.s)
	applyAll(t, c, stream(time.Now().UnixNano(), "GPU-1", 1)[:1])
	err = c.apply(wire.Bye{Type: wire.TypeBye, PID: 1 << 22, T: 1}, 40)
	if err == nil || !strings.Contains(err.Error(), "node1: pid 4194304 is not a process id of a Linux host") {
		t.Fatalf("got %v", err)
	}
}

// Two hosts' pid 1234 send layouts of their torch device 0: each is filed
// under its host's pid key and device, and a row made of the remote's
// stream keeps the layout it was sent with.
func TestLayoutsKeptApart(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := ingest.New(st)
	t0 := time.Now().UnixNano()
	a := newConn(New(in, 1, Options{Host: "node1", Tool: tool}))
	b := newConn(New(in, 2, Options{Host: "node2", Tool: tool}))
	layout := func(free uint64) wire.LayoutReading {
		return wire.LayoutReading{Type: wire.TypeLayout, PID: 1234, Dev: 0, Layout: wire.Layout{T: t0 + 3, Segments: 2,
			Reserved: 4 * free, Allocated: 3 * free, FreeInSegments: free, LargestFree: free / 2,
			Pools: []wire.Pool{{Kind: wire.PoolGraph, ID: "1,2", Reserved: free}}}}
	}
	row := func(free uint64) wire.Row {
		l := layout(free).Layout
		return wire.Row{Type: wire.TypeRow, T: t0 + 4, Label: "key", Dev: 0, PID: 1234, Source: "key", Layout: &l}
	}
	applyAll(t, a, append(stream(t0, "GPU-1", 1), layout(100), row(100)))
	applyAll(t, b, append(stream(t0, "GPU-2", 2), layout(200), row(200)))
	for i, free := range []uint64{100, 200} {
		dev, key := i, store.HostPID(i+1, 1234)
		at := st.LatestLayout(key, dev)
		if !at.OK || at.Layout.FreeInSegments != free || at.Layout.Pools[0].Reserved != free {
			t.Errorf("host %d's layout: %+v, want free %d", i+1, at, free)
		}
		if v, _, ok := st.Latest(store.Key{Dev: dev, PID: key, Metric: store.LargestFree}); !ok || v != free/2 {
			t.Errorf("host %d's largest free series ends at %d (%v)", i+1, v, ok)
		}
	}
	if at := st.LatestLayout(1234, 0); at.OK {
		t.Error("a remote layout landed on the local pid 1234")
	}
	var got []uint64
	for _, r := range st.Rows() {
		if r.Label == "key" && r.Layout != nil {
			got = append(got, r.Layout.FreeInSegments)
		}
	}
	if len(got) != 2 || got[0]+got[1] != 300 {
		t.Errorf("the remote rows' layouts: free %v, want 100 and 200", got)
	}
}
