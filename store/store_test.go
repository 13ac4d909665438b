package store

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/gputop/gputop/wire"
)

const sec = int64(time.Second)

func u(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

func wantU(t *testing.T, what string, got *uint64, want any) {
	t.Helper()
	if u(got) != want {
		t.Fatalf("%s = %v, want %v", what, u(got), want)
	}
}

func TestZeroOptionsAndBadOptions(t *testing.T) {
	st := New(Options{})
	st.AddNVML(0, 1, 5, 0)
	if !reflect.DeepEqual(st.opt, DefaultOptions()) {
		t.Fatalf("zero options became %+v", st.opt)
	}
	// a zero-slot ring or a zero-width tier would panic on the first sample
	st = New(Options{RawCapacity: -1, Tiers: []TierSpec{{time.Second, 10}, {0, 5}, {time.Millisecond, 0}, {10 * time.Millisecond, 10}}})
	for i := range 100 {
		st.AddNVML(0, int64(i)*ms, uint64(i), 0)
	}
	if len(st.opt.Tiers) != 2 || st.opt.Tiers[0].Width != 10*time.Millisecond || st.opt.RawCapacity != 1 {
		t.Fatalf("options not cleaned: %+v", st.opt)
	}
	if m, ok := st.Max(Key{0, 0, NVMLUsed}, 0, 100*ms); !ok || m != 99 {
		t.Fatalf("max %d %v", m, ok)
	}
}

func TestDevicesRateAndErrors(t *testing.T) {
	st := New(DefaultOptions())
	var facts []string // what the store reports it kept, for ingest to record
	keep := func(what string, ok bool) {
		if ok {
			facts = append(facts, what)
		}
	}
	_, ok := st.SetDevice(Device{Index: 1, UUID: "GPU-b", Name: "B", Total: 80 << 30, Source: "nvml"})
	keep("Device", ok)
	ds := st.Devices()
	if len(ds) != 2 || ds[0].Index != 0 || ds[1].UUID != "GPU-b" {
		t.Fatalf("devices %+v", ds)
	}
	st.SetRate(1, 998.5)
	_, ok = st.SetDevice(Device{Index: 1, UUID: "GPU-b", Name: "B", Total: 80 << 30, Source: "nvml"})
	keep("Device", ok)
	if r := st.Devices()[1].Rate; r != 998.5 {
		t.Fatalf("rate lost on update: %v", r)
	}
	g := st.Gen()
	_, changed := st.SetDeviceError(1, 5, "GPU is lost")
	keep("DevError", changed)
	_, changed = st.SetDeviceError(1, 6, "GPU is lost") // unchanged: no second frame
	keep("DevError", changed)
	if d := st.Devices()[1]; d.Err != "GPU is lost" || d.ErrAt != 5 || st.Gen() == g {
		t.Fatalf("error not recorded: %+v", d)
	}
	_, changed = st.SetDeviceError(1, 7, "")
	keep("DevError", changed)
	if d := st.Devices()[1]; d.Err != "" {
		t.Fatalf("error not cleared: %+v", d)
	}
	// out-of-range devices are ignored, not a panic
	_, ok = st.SetDevice(Device{Index: -1})
	keep("Device", ok)
	st.SetRate(-1, 1)
	st.SetRate(9, 1)
	_, changed = st.SetDeviceError(-1, 1, "x")
	keep("DevError", changed)
	_, changed = st.SetDeviceError(9, 1, "x")
	keep("DevError", changed)
	if len(st.Devices()) != 2 {
		t.Fatalf("devices %+v", st.Devices())
	}
	if got, want := facts, []string{"Device", "Device", "DevError", "DevError"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
	if st.DeviceByUUID("GPU-b") != 1 || st.DeviceByUUID("") != -1 || st.DeviceByUUID("GPU-x") != -1 {
		t.Fatalf("DeviceByUUID")
	}
}

// nvmlRun feeds dev at 1 kHz over [from, to) with value f(t).
func nvmlRun(st *Store, dev int, from, to int64, f func(t int64) uint64) {
	for t := from; t < to; t += ms {
		st.AddNVML(dev, t, f(t), 0)
	}
}

func TestAddRowFillsNVMLUsedAndPeak(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0"})
	st.SetDevice(Device{Index: 1, UUID: "GPU-1"})
	t0 := 1000 * sec
	at := func(s float64) int64 { return t0 + int64(s*float64(sec)) }
	// dev 0: 1000 with spikes at 10.2 s (9000) and 20.5 s (8000); a ramp
	// 30-40 s. dev 1: 2000 with a spike at 15 s (7000).
	nvmlRun(st, 0, at(0), at(40), func(t int64) uint64 {
		switch {
		case t == at(10.2):
			return 9000
		case t == at(20.5):
			return 8000
		case t >= at(30):
			return 1000 + uint64((t-at(30))/ms)
		}
		return 1000
	})
	nvmlRun(st, 1, at(0), at(40), func(t int64) uint64 {
		if t == at(15) {
			return 7000
		}
		return 2000
	})

	a := st.AddRow(wire.Row{T: at(10.7), Label: "a", Dev: 0})
	wantU(t, "a used", a.NVMLUsed, uint64(1000))
	wantU(t, "a peak (since the start)", a.NVMLPeak, uint64(9000))
	if a.Type != wire.TypeRow {
		t.Fatalf("type %q", a.Type)
	}
	d := st.AddRow(wire.Row{T: at(12), Label: "d", Dev: 1})
	wantU(t, "d peak", d.NVMLPeak, uint64(2000))
	// The spike at 10.2 s came before a (10.7 s): it is not b's peak, even
	// though it shares a 1 s bucket with a's time.
	b := st.AddRow(wire.Row{T: at(14), Label: "b", Dev: 0})
	wantU(t, "b peak", b.NVMLPeak, uint64(1000))
	// The spike at 20.5 s is after c (20 s), though already ingested.
	c := st.AddRow(wire.Row{T: at(20), Label: "c", Dev: 0})
	wantU(t, "c peak", c.NVMLPeak, uint64(1000))
	// dev 1's own previous row (d) bounds its interval, dev 0's do not
	e := st.AddRow(wire.Row{T: at(16), Label: "e", Dev: 1})
	wantU(t, "e peak", e.NVMLPeak, uint64(7000))
	f := st.AddRow(wire.Row{T: at(35), Label: "f", Dev: 0})
	wantU(t, "f used", f.NVMLUsed, uint64(6000))
	wantU(t, "f peak", f.NVMLPeak, uint64(8000))
	// values the caller sets are kept
	used, peak := uint64(1), uint64(2)
	g := st.AddRow(wire.Row{T: at(36), Label: "g", Dev: 0, NVMLUsed: &used, NVMLPeak: &peak})
	wantU(t, "g used", g.NVMLUsed, uint64(1))
	wantU(t, "g peak", g.NVMLPeak, uint64(2))
	// an earlier row is put in time order; its peak runs from the start
	early := st.AddRow(wire.Row{T: at(5), Label: "early", Dev: 0})
	wantU(t, "early peak", early.NVMLPeak, uint64(1000))
	// no NVML at that time, or no NVML device at all: absent, not 0
	none := st.AddRow(wire.Row{T: at(-1), Label: "before", Dev: 0})
	wantU(t, "before used", none.NVMLUsed, nil)
	other := st.AddRow(wire.Row{T: at(20), Label: "agent-only", Dev: 5})
	wantU(t, "agent-only used", other.NVMLUsed, nil)
	wantU(t, "agent-only peak", other.NVMLPeak, nil)

	var labels []string
	for _, r := range st.Rows() {
		labels = append(labels, r.Label)
	}
	want := []string{"before", "early", "a", "d", "b", "e", "c", "agent-only", "f", "g"}
	if !reflect.DeepEqual(labels, want) {
		t.Fatalf("row order %v, want %v", labels, want)
	}
	// markers are in time order too (a replay counts those before its cursor)
	ms := st.Markers()
	var mlabels []string
	for _, m := range ms {
		mlabels = append(mlabels, m.Label)
	}
	if !reflect.DeepEqual(mlabels, want) || ms[2].Kind != wire.MarkSnapshot || ms[2].T != at(10.7) {
		t.Fatalf("markers %+v", ms)
	}
	if n := st.CountMarkers(at(14)); n != 5 {
		t.Fatalf("CountMarkers(14 s) = %d, want 5", n)
	}
}

// agentSetup: one NVML device; agents 100 (samples every 100 ms from 1 s to
// 10 s) and 200 (every 100 ms from 1.05 s to 6 s, then gone at 6 s).
func agentSetup(t *testing.T) (*Store, func(float64) int64) {
	t.Helper()
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0", Source: "nvml"})
	t0 := 5000 * sec
	at := func(s float64) int64 { return t0 + int64(s*float64(sec)+0.5) }
	nvmlRun(st, 0, at(0), at(12), func(t int64) uint64 { return uint64(t-t0) / uint64(ms) })
	for _, pid := range []int{100, 200} {
		st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: pid, T: at(0.5),
			Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	}
	for i := 0; i <= 90; i++ {
		s := 1 + float64(i)/10
		st.AgentSample(100, wire.Sample{T: at(s), Dev: 0, Allocated: uint64(1000 + i), Reserved: uint64(2000 + i), Peak: uint64(3000 + i)})
		if s+0.05 <= 6 {
			st.AgentSample(200, wire.Sample{T: at(s + 0.05), Dev: 0, Allocated: uint64(5000 + i), Reserved: uint64(6000 + i), Peak: uint64(7000 + i)})
		}
	}
	st.AgentEnded(200, at(6), false, "connection reset")
	return st, at
}

func TestTakeSnapshotRowPerProcess(t *testing.T) {
	st, at := agentSetup(t)
	// 5.02 s: both agents have samples (100 at 5.00 s, 200 at 4.95 s):
	// a row each, in pid order, with each process's own counters
	rs := takeSnapshot(st, "s1", 0, at(5.02), "key", nil)
	if len(rs) != 2 || rs[0].PID != 100 || rs[1].PID != 200 {
		t.Fatalf("rows %+v", rs)
	}
	r := rs[0]
	if r.Label != "s1" || r.Source != "key" || r.Dev != 0 || r.T != at(5.02) || r.End {
		t.Fatalf("row %+v", r)
	}
	wantU(t, "allocated", r.Allocated, uint64(1040))
	wantU(t, "reserved", r.Reserved, uint64(2040))
	wantU(t, "peak", r.Peak, uint64(3040))
	wantU(t, "nvml used", r.NVMLUsed, uint64(5020))
	wantU(t, "allocated", rs[1].Allocated, uint64(5039))
	wantU(t, "peak", rs[1].Peak, uint64(7039))
	// 8 s: agent 200 ended at 6 s; its last sample (5.95 s) is not current
	rs = takeSnapshot(st, "s3", 0, at(8), "key", nil)
	if len(rs) != 1 || rs[0].PID != 100 {
		t.Fatalf("rows after 200 ended: %+v", rs)
	}
	wantU(t, "allocated", rs[0].Allocated, uint64(1070))
	// 3.3 s, exactly
	rs = takeSnapshot(st, "s4", 0, at(3.3), "cli", nil)
	wantU(t, "allocated", rs[1].Allocated, uint64(5022))
	// before any agent sample: one row of no process, NVML only
	rs = takeSnapshot(st, "s5", 0, at(0.9), "key", nil)
	if len(rs) != 1 || rs[0].PID != 0 {
		t.Fatalf("rows before any sample: %+v", rs)
	}
	wantU(t, "allocated", rs[0].Allocated, nil)
	wantU(t, "nvml used", rs[0].NVMLUsed, uint64(900))
	if n := len(st.Rows()); n != 6 {
		t.Fatalf("%d rows", n)
	}
}

// An end row taken from the store asks each agent process on the device
// for a holders walk, waits for the answer, and takes the first walk of
// that device that started after it.
func TestEndRowAwaitsHolders(t *testing.T) {
	st, at := agentSetup(t)
	// pid 200's agent left at 6 s: at 5.5 s its row can only say so
	rs, asks := st.TakeSnapshot("After cleanup", 0, at(5.5), "key", nil, true)
	if len(rs) != 2 || !rs[0].End || !rs[0].Awaiting || rs[1].Awaiting ||
		rs[1].Held == nil || !strings.Contains(rs[1].Held.Skipped, "no longer attached") {
		t.Fatalf("rows %+v", rs)
	}
	if len(asks) != 1 || asks[0] != (HolderAsk{PID: 100, Dev: 0, TorchDev: 0, T: at(5.5)}) {
		t.Fatalf("asks %+v", asks)
	}
	// a walk that started before the row answers nothing; one after does
	h := &wire.Held{T: at(5.4), Allocated: 1, Python: 1}
	st.AgentHolders(100, wire.Holders{T: at(5.6), Dev: 0, Groups: []wire.HolderGroup{}, Held: h})
	if st.Rows()[0].Held != nil {
		t.Fatal("a walk started before the row answered it")
	}
	h2 := &wire.Held{T: at(5.6), Allocated: 1040, Python: 1040,
		Top: []wire.HolderGroup{{Name: "x\x1b[31m", Kind: "variable", Bytes: 1040, Tensors: 1}}}
	_, given, _ := st.AgentHolders(100, wire.Holders{T: at(5.7), Dev: 0, Groups: []wire.HolderGroup{}, Held: h2})
	var row100, row200 wire.Row
	for _, r := range st.Rows() {
		if r.T == at(5.5) && r.PID == 100 {
			row100 = r
		}
		if r.T == at(5.5) && r.PID == 200 {
			row200 = r
		}
	}
	if row100.Held == nil || row100.Held.Python != 1040 || strings.ContainsRune(row100.Held.Top[0].Name, 0x1b) {
		t.Fatalf("pid 100's row: %+v", row100.Held)
	}
	if row200.Held == nil || row200.Held.Python != 0 {
		t.Fatal("pid 100's walk answered pid 200's row")
	}
	// the store reports the late attribution, for the recording
	found := false
	for _, a := range given {
		if a.PID == 100 && a.T == at(5.5) && a.Held.Python == 1040 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no attribution reported for the recording: %+v", given)
	}
	// pid 100 ends before it answers: its row says so instead of waiting
	takeSnapshot(st, "Training end", 0, at(9), "key", nil)
	st.AgentEnded(100, at(9.5), false, "killed")
	for _, r := range st.Rows() {
		if r.T == at(9) && (r.Held == nil || !strings.Contains(r.Held.Skipped, "ended")) {
			t.Fatalf("pid 100's row: %+v", r.Held)
		}
	}
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 100, T: at(9.6), Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentSample(100, wire.Sample{T: at(9.7), Dev: 0, Allocated: 1})
	// with no way to ask (no agent socket), the row says so instead of
	// waiting
	rs, asks = st.TakeSnapshot("x", 0, at(7), "key", &[]bool{true}[0], false)
	if len(asks) != 0 || rs[0].Awaiting || rs[0].Held == nil || !strings.Contains(rs[0].Held.Skipped, "no agent socket here") {
		t.Fatalf("without an asker: %+v, asks %+v", rs[0], asks)
	}
	// end=false: no end row, whatever the label; it asks for the walk's
	// ledger only
	rs, asks = st.TakeSnapshot("Training end", 0, at(8), "key", &[]bool{false}[0], true)
	if rs[0].End || len(asks) != 1 || !rs[0].Awaiting {
		t.Fatalf("end=false: %+v, asks %+v", rs[0], asks)
	}
	// and without a way to ask, no ledger and no wait
	rs, asks = st.TakeSnapshot("Training end", 0, at(8), "key", &[]bool{false}[0], false)
	if rs[0].End || len(asks) != 0 || rs[0].Awaiting || rs[0].Ledger != nil {
		t.Fatalf("end=false without an asker: %+v, asks %+v", rs[0], asks)
	}
}

// A device with processes that have no agent: the end row lists them as
// NVML saw them, for their verdict.
func TestEndRowListsProcessesWithoutAgent(t *testing.T) {
	st, at := agentSetup(t)
	st.SetProcs(0, at(5.9), []wire.Proc{{PID: 100, Used: 5 << 20}, {PID: 300, Name: "python3", Used: 600 << 20}})
	rs := takeSnapshot(st, "cleanup", 0, at(6), "key", nil)
	last := rs[len(rs)-1]
	if last.PID != 0 || last.Procs == nil || len(*last.Procs) != 1 || (*last.Procs)[0].PID != 300 {
		t.Fatalf("rows %+v", rs)
	}
	// not an end row: no such row
	if rs := takeSnapshot(st, "Epoch 1", 0, at(6.5), "key", nil); len(rs) != 1 || rs[0].PID != 100 {
		t.Fatalf("rows %+v", rs)
	}
}

func TestAgentHelloMapsByUUID(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-aaa", Name: "H200", Source: "nvml"})
	st.SetDevice(Device{Index: 1, UUID: "GPU-bbb", Name: "H200", Source: "nvml"})
	nvmlRun(st, 0, 0, 2*sec, func(int64) uint64 { return 10 })
	nvmlRun(st, 1, 0, 2*sec, func(int64) uint64 { return 11 })
	// CUDA_VISIBLE_DEVICES=1,0 plus a device NVML does not list
	_, added := st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 42, T: 1, Devices: []wire.AgentDevice{
		{Index: 0, UUID: "GPU-bbb"}, {Index: 1, UUID: "GPU-aaa"}, {Index: 2, UUID: "GPU-zzz", Name: "Other", Total: 16 << 30}}})
	if len(added) != 1 || added[0].UUID != "GPU-zzz" || added[0].Index != 2 {
		t.Fatalf("agent-only devices reported %+v", added)
	}
	ds := st.Devices()
	if len(ds) != 3 || ds[2].UUID != "GPU-zzz" || ds[2].Source != "agent" || ds[2].Name != "Other" || ds[2].Total != 16<<30 {
		t.Fatalf("devices %+v", ds)
	}
	ag := st.Agents()
	if len(ag) != 1 || !ag[0].Connected || !reflect.DeepEqual(ag[0].DevMap, map[int]int{0: 1, 1: 0, 2: 2}) {
		t.Fatalf("agents %+v", ag)
	}
	st.AgentSample(42, wire.Sample{T: sec, Dev: 0, Allocated: 7, Reserved: 8, Peak: 9})
	st.AgentSample(42, wire.Sample{T: sec, Dev: 7, Allocated: 1}) // unmapped: dropped
	st.AgentSample(43, wire.Sample{T: sec, Dev: 0, Allocated: 1}) // unknown pid: dropped
	if v, ok := st.ValueAt(Key{1, 42, Allocated}, sec); !ok || v != 7 {
		t.Fatalf("torch 0 sample not on store device 1: %d %v", v, ok)
	}
	if ks := st.Keys(); len(ks) != 7 {
		t.Fatalf("keys %v", ks)
	}
	if last := st.Agents()[0].Last[1]; last.Allocated != 7 {
		t.Fatalf("Last %+v", st.Agents()[0].Last)
	}

	rows := st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: sec + 500*ms, Label: "Epoch 5", Devs: []wire.DevStats{
		{Dev: 0, Allocated: 100, Reserved: 200, Peak: 300},
		{Dev: 1, Allocated: 101, Reserved: 201, Peak: 301},
		{Dev: 2, Allocated: 102, Reserved: 202, Peak: 302},
		{Dev: 9, Allocated: 1}, // not in hello: skipped
	}})
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, wantDev := range []int{1, 0, 2} {
		r := rows[i]
		if r.Dev != wantDev || r.PID != 42 || r.Label != "Epoch 5" || r.Source != "agent" || r.T != sec+500*ms {
			t.Fatalf("row %d %+v", i, r)
		}
		wantU(t, "allocated", r.Allocated, uint64(100+i))
		wantU(t, "reserved", r.Reserved, uint64(200+i))
		wantU(t, "peak", r.Peak, uint64(300+i))
	}
	wantU(t, "dev 1 nvml", rows[0].NVMLUsed, uint64(11))
	wantU(t, "dev 0 nvml", rows[1].NVMLUsed, uint64(10))
	wantU(t, "agent-only nvml", rows[2].NVMLUsed, nil)
	if len(st.Rows()) != 3 {
		t.Fatalf("rows %+v", st.Rows())
	}

	st.AgentMark(42, wire.Mark{T: 2 * sec, Label: "train", Kind: wire.MarkPhaseStart, Devs: []wire.DevStats{{Dev: 0}}})
	st.AgentMark(42, wire.Mark{T: 3 * sec, Label: "train", Kind: wire.MarkPhaseEnd, Devs: []wire.DevStats{{Dev: 0}}})
	if rows := st.AgentMark(77, wire.Mark{T: 3 * sec, Label: "x", Devs: []wire.DevStats{{Dev: 0}}}); rows != nil {
		t.Fatalf("mark from an unknown pid: %+v", rows)
	}
	ms := st.Markers()
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d:%s:%s", m.Dev, m.Label, m.Kind))
	}
	want := []string{"1:Epoch 5:snapshot", "0:Epoch 5:snapshot", "2:Epoch 5:snapshot", "1:train (start):phase_start", "1:train (end):phase_end"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}

	// a second process on the agent-only device shares it
	st.AgentHello(wire.Hello{PID: 43, T: 2, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-zzz"}}})
	if len(st.Devices()) != 3 || st.Agents()[1].DevMap[0] != 2 {
		t.Fatalf("second agent on GPU-zzz: %+v %+v", st.Devices(), st.Agents()[1].DevMap)
	}
	// no UUID at all: one new device, kept when the same process says hello again
	st.AgentHello(wire.Hello{PID: 44, T: 3, Devices: []wire.AgentDevice{{Index: 0, Name: "no uuid"}}})
	h, added := st.AgentHello(wire.Hello{PID: 44, T: 4, Devices: []wire.AgentDevice{{Index: 0, Name: "no uuid"}}})
	if n := len(st.Devices()); n != 4 {
		t.Fatalf("%d devices after a reconnect without UUID", n)
	}
	if h.PID != 44 || len(added) != 0 {
		t.Fatalf("the reconnect's hello %+v added %+v", h, added)
	}
}

func TestAgentOOM(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0"})
	nvmlRun(st, 0, 0, sec, func(int64) uint64 { return 77 })
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	oom, _, kept := st.AgentOOM(9, wire.OOM{Type: wire.TypeOOM, T: 500 * ms, Dev: 0, Requested: 1 << 30, Allocated: 10, Reserved: 20, Peak: 30})
	if _, _, ok := st.AgentOOM(9, wire.OOM{T: 600 * ms, Dev: 3}); ok { // unmapped device: ignored
		t.Fatal("an oom on an unmapped device was kept")
	}
	if _, _, ok := st.AgentOOM(8, wire.OOM{T: 600 * ms, Dev: 0}); ok { // unknown pid: ignored
		t.Fatal("an oom of an unknown pid was kept")
	}
	if a := st.Agents()[0]; a.OOMs != 1 {
		t.Fatalf("OOMs %d", a.OOMs)
	}
	rows := st.Rows()
	if len(rows) != 1 || rows[0].Label != "OOM" || rows[0].Source != "oom" || rows[0].PID != 9 || rows[0].T != 500*ms {
		t.Fatalf("rows %+v", rows)
	}
	wantU(t, "allocated", rows[0].Allocated, uint64(10))
	wantU(t, "reserved", rows[0].Reserved, uint64(20))
	wantU(t, "peak", rows[0].Peak, uint64(30))
	wantU(t, "nvml", rows[0].NVMLUsed, uint64(77))
	m := st.Markers()
	if len(m) != 1 || m[0].Kind != "oom" || m[0].Dev != 0 || m[0].PID != 9 {
		t.Fatalf("markers %+v", m)
	}
	// the event as kept, for the recording
	if !kept || oom.PID != 9 || oom.Requested != 1<<30 {
		t.Fatalf("oom as kept %+v (%v)", oom, kept)
	}
	// the row carries its frame, for what the row has no column for
	if o := rows[0].OOM; o == nil || o.Requested != 1<<30 || o.Allocated != 10 {
		t.Fatalf("the OOM row's frame: %+v", o)
	}
	for _, r := range st.Rows() {
		if r.PID == 8 {
			t.Fatal("an ignored oom frame made a row")
		}
	}
	// a reconnect keeps the count and the holders report
	st.AgentHolders(9, wire.Holders{T: 700 * ms, Dev: 0, Total: 5, Groups: []wire.HolderGroup{{Kind: "container", Name: "losses", Bytes: 5}}})
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	if a := st.Agents()[0]; a.OOMs != 1 || a.Holders == nil || a.Holders.PID != 9 || a.Holders.Groups[0].Name != "losses" {
		t.Fatalf("after reconnect %+v", a)
	}
}

func TestAgentEndedKeepsHistory(t *testing.T) {
	st, at := agentSetup(t)
	ag := st.Agents()
	if len(ag) != 2 || ag[1].Hello.PID != 200 || ag[1].Connected || !ag[1].Ended ||
		ag[1].EndReason != "connection reset" || ag[1].EndedAt != at(6) {
		t.Fatalf("agent 200 %+v", ag[1])
	}
	if v, ok := st.ValueAt(Key{0, 200, Allocated}, at(3)); !ok || v != 5019 {
		t.Fatalf("history of an ended agent: %d %v", v, ok)
	}
	if n := st.Count(Key{0, 200, Peak}); n != 50 {
		t.Fatalf("%d samples", n)
	}
	m := st.Markers()
	if len(m) != 1 || m[0].Kind != "ended" || m[0].PID != 200 || m[0].T != at(6) {
		t.Fatalf("markers %+v", m)
	}
	// a second end report changes nothing
	_, _, changed := st.AgentEnded(200, at(7), true, "bye")
	if len(st.Markers()) != 1 || st.Agents()[1].EndedAt != at(6) || changed {
		t.Fatalf("second end changed the agent")
	}
	// a clean end: bye frame, not marked as killed, no marker
	_, _, changed = st.AgentEnded(100, at(11), true, "bye")
	a := st.Agents()[0]
	if a.Connected || a.Ended || a.EndedAt != at(11) {
		t.Fatalf("agent 100 after bye %+v", a)
	}
	if !changed || len(st.Markers()) != 1 {
		t.Fatalf("changed %v markers %+v", changed, st.Markers())
	}
	st.AgentEnded(12345, 1, false, "unknown") // no panic, nothing added
	// a process on several devices: one marker each, in device order
	for d := 1; d < 4; d++ {
		st.SetDevice(Device{Index: d, UUID: fmt.Sprintf("GPU-%d", d)})
	}
	st.AgentHello(wire.Hello{PID: 300, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-3"}, {Index: 1, UUID: "GPU-1"}, {Index: 2, UUID: "GPU-2"}}})
	st.AgentEnded(300, at(12), false, "killed")
	var devs []int
	for _, m := range st.Markers()[1:] {
		devs = append(devs, m.Dev)
	}
	if !reflect.DeepEqual(devs, []int{1, 2, 3}) {
		t.Fatalf("ended markers on devices %v", devs)
	}
	if len(st.Agents()) != 3 {
		t.Fatalf("agents %+v", st.Agents())
	}
}

// Two rows between the same two NVML samples (Training end a few µs after
// Epoch 10): the second's peak since the first is the level held between
// them, not unknown.
func TestPeakBetweenSamples(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0"})
	st.AddNVML(0, 10, 500, 5)
	st.AddNVML(0, 20, 700, 5)
	takeSnapshot(st, "a", 0, 21, "key", nil)
	takeSnapshot(st, "b", 0, 22, "key", nil)
	st.AddNVML(0, 30, 600, 5)
	rows := st.Rows()
	if u(rows[0].NVMLPeak) != uint64(700) || u(rows[1].NVMLUsed) != uint64(700) || u(rows[1].NVMLPeak) != uint64(700) {
		t.Fatalf("rows %+v / %+v: want peaks 700", rows[0], rows[1])
	}
}

// A row newer than the newest NVML sample (an agent's mark or OOM arrives
// before the sampler's batch of that instant) takes the NVML figures of its
// own time once the samples are in, not the stale ones at hand.
func TestRowWaitsForItsNVMLSample(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, PID: 7, T: 1, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AddNVML(0, 10, 1000, 5)
	st.AgentOOM(7, wire.OOM{T: 40, Dev: 0, Requested: 1 << 30, Allocated: 9000})
	if r := st.Rows()[0]; u(r.NVMLUsed) != uint64(1000) || u(r.NVMLPeak) != uint64(1000) {
		t.Fatalf("before the samples: best known %+v", r)
	}
	gen := st.Gen()
	// the batch arrives: the GPU filled between 10 and 40
	for i, v := range []uint64{3000, 9500, 9800, 9900} {
		st.AddNVML(0, 20+int64(i)*10, v, 5) // 20, 30, 40, 50
	}
	r := st.Rows()[0]
	if u(r.NVMLUsed) != uint64(9800) || u(r.NVMLPeak) != uint64(9800) {
		t.Fatalf("OOM row: NVML used %v, peak %v; want 9800 (the sample at 40)", u(r.NVMLUsed), u(r.NVMLPeak))
	}
	if st.Gen() == gen {
		t.Fatal("filling the row did not move the generation")
	}
	// a later row counts its peak from the OOM row on
	st.AddNVML(0, 60, 9000, 5)
	takeSnapshot(st, "after", 0, 60, "key", nil)
	if r := st.Rows()[1]; u(r.NVMLUsed) != uint64(9000) || u(r.NVMLPeak) != uint64(9900) {
		t.Fatalf("row after: %+v", r)
	}
}

func TestProcsLogsAndQueries(t *testing.T) {
	st := New(DefaultOptions())
	if st.Start() != 0 || st.End() != 0 {
		t.Fatalf("empty store start/end")
	}
	if _, _, ok := st.Latest(Key{0, 0, NVMLUsed}); ok {
		t.Fatalf("latest of nothing")
	}
	if c := st.Columns(Key{0, 0, NVMLUsed}, 0, 10, 4); len(c) != 4 || c[0].OK {
		t.Fatalf("columns of nothing %+v", c)
	}
	if _, ok := st.Max(Key{0, 0, NVMLUsed}, 0, 10); ok {
		t.Fatalf("max of nothing")
	}
	procs := []wire.Proc{{PID: 1, Name: "a", Used: 10}, {PID: 2, Name: "b", Used: 20}}
	st.SetProcs(0, 5*sec, procs)
	procs[0].Used = 999 // the caller's slice is not the store's
	got, at := st.Procs(0)
	if at != 5*sec || len(got) != 2 || got[0].Used != 10 {
		t.Fatalf("procs %+v at %d", got, at)
	}
	st.SetProcs(0, 6*sec, procs[1:])
	if got, _ := st.Procs(0); len(got) != 1 || got[0].PID != 2 {
		t.Fatalf("procs not replaced: %+v", got)
	}
	if v, ok := st.ValueAt(Key{0, 1, ProcUsed}, 5*sec); !ok || v != 10 {
		t.Fatalf("proc series %d %v", v, ok)
	}
	st.AddNVML(0, 4*sec, 1, 1)
	st.AddNVML(1, 7*sec, 1, 1)
	if st.Start() != 4*sec || st.End() != 7*sec {
		t.Fatalf("start %d end %d", st.Start(), st.End())
	}
	if ks := st.Keys(); !reflect.DeepEqual(ks, []Key{{0, 0, NVMLUsed}, {0, 0, NVMLReserved}, {0, 1, ProcUsed}, {0, 2, ProcUsed}, {1, 0, NVMLUsed}, {1, 0, NVMLReserved}}) {
		t.Fatalf("keys %v", ks)
	}
	if NVMLUsed.String() != "nvml_used" || Peak.String() != "peak" {
		t.Fatalf("metric names")
	}
}

// TestConcurrentSourcesAndReaders runs NVML, agent and process sources
// against readers doing what the UI does; run it with -race.
func TestConcurrentSourcesAndReaders(t *testing.T) {
	st := New(Options{RawCapacity: 2000, Tiers: []TierSpec{{10 * time.Millisecond, 300}, {100 * time.Millisecond, 300}}})
	const devs, per = 4, 3000
	for d := range devs {
		st.SetDevice(Device{Index: d, UUID: fmt.Sprintf("GPU-%d", d)})
	}
	st.AgentHello(wire.Hello{PID: 1, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-2"}}})
	var writers sync.WaitGroup
	var done atomic.Bool
	for d := range devs {
		writers.Go(func() {
			for i := range per {
				st.AddNVML(d, int64(i)*ms, uint64(i), 0)
				if i%1000 == 0 {
					st.SetRate(d, 1000)
				}
			}
		})
	}
	writers.Go(func() {
		for i := range per / 10 {
			st.AgentSample(1, wire.Sample{T: int64(i*10) * ms, Dev: 0, Allocated: uint64(i)})
			st.SetProcs(2, int64(i*10)*ms, []wire.Proc{{PID: 1, Used: uint64(i)}})
			if i%50 == 0 {
				takeSnapshot(st, fmt.Sprintf("s%d", i), 2, int64(i*10)*ms, "key", nil)
				st.AgentMark(1, wire.Mark{T: int64(i*10) * ms, Label: "m", Devs: []wire.DevStats{{Dev: 0}}})
			}
		}
	})
	var readers sync.WaitGroup
	var reads atomic.Int64
	for r := range 2 {
		readers.Go(func() {
			for !done.Load() {
				end := st.End()
				for d := range devs {
					k := Key{d, 0, NVMLUsed}
					cols := st.Columns(k, end-int64(r+1)*sec, end+1, 160)
					if c := cols[159]; c.OK && c.Max > uint64(per) {
						t.Errorf("column max %d beyond any sample", c.Max)
					}
					st.Max(k, 0, end+1)
					st.ValueAt(k, end/2)
					st.Latest(k)
				}
				st.Devices()
				st.Agents()
				st.Rows()
				st.Markers()
				st.Procs(2)
				st.Keys()
				st.Gen()
				reads.Add(1)
			}
		})
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	for d := range devs {
		k := Key{d, 0, NVMLUsed}
		if n := st.Count(k); n != per {
			t.Fatalf("dev %d has %d samples, want %d", d, n, per)
		}
		if m, ok := st.Max(k, 0, per*ms); !ok || m != per-1 {
			t.Fatalf("dev %d max %d", d, m)
		}
	}
	if n := len(st.Rows()); n != 2*per/500 {
		t.Fatalf("%d rows, want %d (a key and a mark every 500 ms)", n, 2*per/500)
	}
	if reads.Load() == 0 {
		t.Fatalf("readers never ran")
	}
}

func TestProcNameOutlivesTheProcessList(t *testing.T) {
	s := New(DefaultOptions())
	s.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "A"})
	s.SetProcs(0, 1, []wire.Proc{{PID: 7, Name: "python3", Used: 1}})
	s.SetProcs(0, 2, []wire.Proc{{PID: 7, Name: "?", Used: 1}}) // /proc entry already gone
	s.SetProcs(0, 3, nil)                                       // exited
	if got := s.ProcName(7); got != "python3" {
		t.Fatalf("ProcName(7) = %q, want python3", got)
	}
	if got := s.ProcName(8); got != "" {
		t.Fatalf("unknown pid named %q", got)
	}
}

func TestTextFromPeersCannotDriveTheTerminal(t *testing.T) {
	s := New(DefaultOptions())
	s.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "A\x1bP1$r\x1b\\"})
	s.SetDeviceError(0, 1, "Unknown\x1b[5m")
	s.AgentHello(wire.Hello{Type: "hello", V: 1, PID: 9, Argv: []string{"python\x1b[2J", "train.py"}, Host: "h\x07",
		Torch: "2.5\x1b[31m", Python: "3.12\u202e",
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b", Name: "B\x1b]0;x\x07"}}, T: 1})
	row := s.AddRow(wire.Row{T: 2, Label: "Epoch\x1b]0;pwned\x07 5\n", Dev: 0, Source: "cli"})
	s.SetProcs(0, 3, []wire.Proc{{PID: 9, Name: "py\x1bthon", Used: 1}})
	s.AgentHolders(9, wire.Holders{T: 4, Groups: []wire.HolderGroup{{Kind: "container", Name: "losses\x1b[31m", Hint: "a\tb", Examples: []string{"f\x00"}}}})
	texts := []string{row.Label, s.Rows()[0].Label, s.Markers()[0].Label, s.Agents()[0].Hello.Argv[0], s.Agents()[0].Hello.Host}
	procs, _ := s.Procs(0)
	texts = append(texts, procs[0].Name, s.ProcName(9))
	g := s.Agents()[0].Holders.Groups[0]
	texts = append(texts, g.Name, g.Hint, g.Examples[0])
	a := s.Agents()[0]
	texts = append(texts, a.Hello.Torch, a.Hello.Python, s.Devices()[0].Name, s.Devices()[0].Err, s.Devices()[1].Name)
	s.AgentEnded(9, 5, false, "closed: \x1b[2J")
	texts = append(texts, s.Agents()[0].EndReason)
	for _, x := range texts {
		for _, r := range x {
			if unicode.IsControl(r) || r == '\u202e' {
				t.Fatalf("control character %U left in %q", r, x)
			}
		}
	}
	if row.Label != "Epoch\uFFFD 5 " || g.Hint != "a b" || s.Devices()[1].Name != "B\uFFFD" || a.Hello.Python != "3.12\uFFFD" {
		t.Fatalf("%q %q", row.Label, g.Hint)
	}
	if CleanText("Epoch 5 — ✓") != "Epoch 5 — ✓" {
		t.Fatal("printable text must pass unchanged")
	}
}

// Shape moves with everything that changes a screen's layout, and not with
// samples.
func TestShape(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "H200"})
	prev := st.Shape()
	step := func(what string, f func(), want bool) {
		t.Helper()
		f()
		sh := st.Shape()
		if moved := sh != prev; moved != want {
			t.Errorf("%s: shape moved %v, want %v (%+v -> %+v)", what, moved, want, prev, sh)
		}
		prev = sh
	}
	step("a sample", func() { st.AddNVML(0, 10, 1, 0) }, false)
	step("a hello", func() {
		st.AgentHello(wire.Hello{PID: 7, T: 11, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	}, true)
	step("an agent sample", func() {
		st.AgentSample(7, wire.Sample{T: 12, Dev: 0, Allocated: 5, Reserved: 6, Peak: 7})
	}, false)
	step("a snapshot", func() { takeSnapshot(st, "x", 0, 13, "key", nil) }, true)
	step("an OOM", func() { st.AgentOOM(7, wire.OOM{T: 14, Dev: 0}) }, true)
	step("a holders report", func() { st.AgentHolders(7, wire.Holders{T: 15}) }, true)
	step("the end of an agent", func() { st.AgentEnded(7, 16, false, "connection lost") }, true)
	step("a device", func() { st.SetDevice(Device{Index: 1, UUID: "GPU-b"}) }, true)
}

// Series of processes that have gone are kept for the KeepGone most recent;
// older ones are dropped, their rows and names kept. A process
// still in NVML's list, or back with the same pid, is not gone.
func TestKeepGoneBoundsEndedProcesses(t *testing.T) {
	opt := DefaultOptions()
	opt.KeepGone = 2
	st := New(opt)
	st.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "H200"})
	has := func(pid int) bool { return st.Count(Key{Dev: 0, PID: pid, Metric: Allocated}) > 0 }
	run := func(pid int, at int64) {
		st.AgentHello(wire.Hello{PID: pid, T: at, Argv: []string{"job"}, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
		st.AgentSample(pid, wire.Sample{T: at + 1, Dev: 0, Allocated: 5, Reserved: 6, Peak: 7})
		st.AgentMark(pid, wire.Mark{T: at + 2, Label: fmt.Sprintf("row of %d", pid), Devs: []wire.DevStats{{Dev: 0, Allocated: 5, Reserved: 6, Peak: 7}}})
	}
	for i, pid := range []int{101, 102, 103} {
		run(pid, int64(10*(i+1)))
	}
	// 101 ends but is still in NVML's process list: not gone yet
	st.SetProcs(0, 40, []wire.Proc{{PID: 101, Used: 1 << 30}})
	st.AgentEnded(101, 41, false, "connection lost")
	st.AgentEnded(102, 42, false, "connection lost")
	st.AgentEnded(103, 43, true, "")
	if !has(101) || !has(102) || !has(103) {
		t.Fatalf("series dropped while at most 2 processes had gone")
	}
	st.SetProcs(0, 50, nil) // 101 leaves the GPU: the third gone, 102 the longest gone
	if has(102) {
		t.Errorf("the longest-gone process keeps its series past KeepGone")
	}
	if !has(101) || !has(103) {
		t.Errorf("the two most recently gone lost their series")
	}
	if st.Count(Key{Dev: 0, PID: 101, Metric: ProcUsed}) == 0 {
		t.Errorf("101's NVML series went with 102's")
	}
	rows := 0
	for _, r := range st.Rows() {
		if r.PID == 102 {
			rows++
		}
	}
	if rows != 1 || len(st.Agents()) != 3 {
		t.Errorf("102's row or agent entry went with its series (rows %d)", rows)
	}
	// 103's pid is reused: it is not gone, and two more ends do not drop it
	run(103, 60)
	run(104, 70)
	run(105, 80)
	st.AgentEnded(104, 81, false, "connection lost")
	st.AgentEnded(105, 82, false, "connection lost")
	if !has(103) {
		t.Errorf("a process back under a reused pid lost its series")
	}
	if has(101) {
		t.Errorf("101 should have been dropped by the two later ends")
	}
}

func TestKeepGoneZeroKeepsEverything(t *testing.T) {
	opt := DefaultOptions()
	opt.KeepGone = 0
	st := New(opt)
	st.SetDevice(Device{Index: 0, UUID: "GPU-a"})
	for pid := 1; pid <= 50; pid++ {
		st.SetProcs(0, int64(pid), []wire.Proc{{PID: pid, Used: 1}})
	}
	st.SetProcs(0, 100, nil)
	for pid := 1; pid <= 50; pid++ {
		if st.Count(Key{Dev: 0, PID: pid, Metric: ProcUsed}) != 1 {
			t.Fatalf("pid %d lost its series with KeepGone 0", pid)
		}
	}
}

// A process's last rows often come after its last sample: the store's end
// reaches them, so a replay can show them.
func TestEndReachesRowsAfterTheLastSample(t *testing.T) {
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-0"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: sec, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentSample(7, wire.Sample{T: 2 * sec, Dev: 0, Allocated: 1})
	st.AgentMark(7, wire.Mark{T: 2*sec + 30*ms, Label: "After cleanup", Devs: []wire.DevStats{{Dev: 0}}})
	if got := st.End(); got != 2*sec+30*ms {
		t.Fatalf("End() = %d, want the row's time %d", got, 2*sec+30*ms)
	}
	st.AddNVML(0, 3*sec, 5, 0)
	if got := st.End(); got != 3*sec {
		t.Fatalf("End() = %d after a later sample", got)
	}
}

// takeSnapshot is TakeSnapshot by a caller that can ask agents for their
// walks (ingest with an agent socket); the asks are left unsent.
func takeSnapshot(st *Store, label string, dev int, t int64, source string, end *bool) []wire.Row {
	rows, _ := st.TakeSnapshot(label, dev, t, source, end, true)
	return rows
}
