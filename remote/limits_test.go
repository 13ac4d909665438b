package remote

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// One host sending more than its bounds allow: devices past its share, a
// hello too long, more agents than MaxAgents, a hello naming a device its
// stream never listed, an NVML process list past MaxProcs. The other
// host's device and agent are untouched; what was left out is counted in
// the host's state and each bound is logged once.
func TestHostBounds(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := ingest.New(st)
	t0 := time.Now().UnixNano()
	var logs []string
	const share = 4
	flood := newConn(New(in, 1, Options{Host: "flood", Tool: tool, Devices: share, Log: func(l string) { logs = append(logs, l) }}))
	other := newConn(New(in, 2, Options{Host: "other", Tool: tool, Devices: share}))
	applyAll(t, flood, stream(t0, "GPU-flood-0", 1)[:1])
	applyAll(t, other, stream(t0, "GPU-other", 1)[:1])

	// devices: the share, then nothing more; one seen again is no new one
	for i := range share + 3 {
		applyAll(t, flood, []wire.Frame{wire.Device{Type: wire.TypeDevice, Index: i, UUID: fmt.Sprintf("GPU-flood-%d", i), Name: "H200", Total: 1 << 37}})
	}
	applyAll(t, flood, []wire.Frame{wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-flood-0", Name: "H200", Total: 1 << 37}})
	applyAll(t, other, stream(t0, "GPU-other", 7)[1:])
	var mine, others int
	for _, d := range st.Devices() {
		switch d.Host {
		case "flood":
			mine++
		case "other":
			others++
		}
	}
	if mine != share || others != 1 {
		t.Fatalf("flood has %d devices (share %d), other %d: %+v", mine, share, others, st.Devices())
	}

	hello := func(pid int, devs ...wire.AgentDevice) wire.Hello {
		return wire.Hello{Type: wire.TypeHello, V: 1, PID: pid, T: t0, Argv: []string{"train.py"}, Devices: devs}
	}
	dev0 := wire.AgentDevice{Index: 0, UUID: "GPU-flood-0"}
	// a hello over MaxHelloBytes: refused, and its later frames with it
	if err := flood.apply(hello(100, dev0), MaxHelloBytes+1); err != nil {
		t.Fatal(err)
	}
	applyAll(t, flood, []wire.Frame{
		wire.Samples{Type: wire.TypeSamples, PID: 100, Dev: 0, T0: t0 + 1, DT: []int64{0}, Allocated: []int64{5}, Reserved: []int64{0}, Peak: []int64{0}},
		wire.Row{Type: wire.TypeRow, T: t0 + 2, Label: "refused row", Dev: 0, PID: 100, Source: "agent"},
		wire.Bye{Type: wire.TypeBye, PID: 100, T: t0 + 3},
	})
	// a hello at the bound is taken, naming one device the stream never listed
	if err := flood.apply(hello(101, dev0, wire.AgentDevice{Index: 1, UUID: "GPU-never-listed"}), MaxHelloBytes); err != nil {
		t.Fatal(err)
	}
	// MaxAgents connected (101 among them), then 3 more refused; a bye
	// makes room for one
	for pid := 102; pid < 101+MaxAgents+3; pid++ {
		applyAll(t, flood, []wire.Frame{hello(pid, dev0)})
	}
	applyAll(t, flood, []wire.Frame{wire.Bye{Type: wire.TypeBye, PID: 102, T: t0 + 4}, hello(5000, dev0)})
	applyAll(t, other, []wire.Frame{hello(100, wire.AgentDevice{Index: 0, UUID: "GPU-other"})})

	agents := map[int]store.Agent{}
	for _, a := range st.Agents() {
		agents[a.Hello.PID] = a
	}
	if _, ok := agents[store.HostPID(1, 100)]; ok {
		t.Error("the hello over MaxHelloBytes was taken")
	}
	if rows := st.Rows(); len(rows) != 1 || rows[0].Label != "Epoch 1" {
		t.Errorf("rows %+v: want only other's", rows)
	}
	a, ok := agents[store.HostPID(1, 101)]
	if !ok || len(a.DevMap) != 1 || len(a.Hello.Devices) != 1 {
		t.Errorf("pid 101: %+v, want its one listed device", a)
	}
	var connected int
	for k, a := range agents {
		if h, _ := store.SplitPID(k); h == 1 && a.Connected {
			connected++
		}
	}
	if connected != MaxAgents {
		t.Errorf("%d agents of flood connected, want %d", connected, MaxAgents)
	}
	if _, ok := agents[store.HostPID(1, 5000)]; !ok {
		t.Error("a bye did not make room for another agent")
	}
	if _, ok := agents[store.HostPID(2, 100)]; !ok {
		t.Error("other's agent was refused")
	}

	// an NVML process list past MaxProcs keeps the ones using the most
	procs := make([]wire.Proc, MaxProcs+10)
	for i := range procs {
		procs[i] = wire.Proc{PID: i + 1, Used: uint64(i + 1)}
	}
	applyAll(t, flood, []wire.Frame{wire.Procs{Type: wire.TypeProcs, T: t0, Dev: 0, Procs: procs}})
	kept, _ := st.Procs(flood.devs[0])
	if len(kept) != MaxProcs {
		t.Fatalf("%d processes kept, want %d", len(kept), MaxProcs)
	}
	for _, p := range kept {
		if _, pid := store.SplitPID(p.PID); pid <= 10 {
			t.Fatalf("pid %d (%d B) kept over bigger ones", pid, p.Used)
		}
	}

	flood.showLimits()
	want := "left out 1 hello over 64.0 KiB, 3 agents past 256, 3 devices past its share of 4, 1 hello device not in its stream, " +
		"10 NVML processes past 1024 a GPU, 2 frames of refused agents"
	hs := st.Hosts()
	if hs[0].Limited != want || !hs[0].Up {
		t.Errorf("flood's state %+v,\nwant limited %q", hs[0], want)
	}
	if hs[1].Limited != "" {
		t.Errorf("other's state %+v", hs[1])
	}
	// each bound logged once, naming the host
	if len(logs) != 6 {
		t.Errorf("%d log lines, want one per bound:\n%s", len(logs), strings.Join(logs, "\n"))
	}
	for _, l := range logs {
		if !strings.HasPrefix(l, "flood: ") || !strings.HasSuffix(l, "(the host's state counts the rest)") {
			t.Errorf("log line %q", l)
		}
	}
	// the host down keeps what its last connection left out
	flood.s.limited = flood.limited()
	flood.s.down("ssh flood exited with status 255")
	if h := st.Hosts()[0]; h.Up || h.Limited != want {
		t.Errorf("flood down: %+v", h)
	}
}

func TestDeviceShare(t *testing.T) {
	for _, c := range []struct {
		hosts int
		local bool
		want  int
	}{{1, false, 1024}, {1, true, 512}, {2, false, 512}, {3, true, 256}, {store.MaxHosts, false, 2}} {
		if got := DeviceShare(c.hosts, c.local); got != c.want {
			t.Errorf("DeviceShare(%d, %v) = %d, want %d", c.hosts, c.local, got, c.want)
		}
	}
}
