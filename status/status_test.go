package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const (
	t0   = int64(1_767_225_600_000_000_000)
	ms   = int64(time.Millisecond)
	gib  = uint64(1) << 30
	uuid = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
	pid  = 4242
)

func newStore() *store.Store {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: uuid, Name: "NVIDIA H200", Total: 80 * gib, Source: "nvml"})
	return st
}

func hello(p int, devs ...int) wire.Hello {
	h := wire.Hello{Type: wire.TypeHello, V: 1, PID: p, Argv: []string{"/usr/bin/train.py", "--lr"}, Torch: "2.11.0", T: t0}
	for _, d := range devs {
		u := uuid
		if d > 0 {
			u = fmt.Sprintf("GPU-other-%d", d)
		}
		h.Devices = append(h.Devices, wire.AgentDevice{Index: d, UUID: u, Name: "NVIDIA H200"})
	}
	return h
}

func mark(t int64, label string, ds wire.DevStats) wire.Mark {
	return wire.Mark{Type: wire.TypeMark, T: t, Label: label, Devs: []wire.DevStats{ds}}
}

// encode is the report as gputop status --json writes it, decoded again
// into the typed report with unknown fields refused.
func roundTrip(t *testing.T, r wire.StatusReport) wire.StatusReport {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var back wire.StatusReport
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return back
}

func u(v uint64) string { return fmt.Sprint(v) }

func opt(p *uint64) string {
	if p == nil {
		return "absent"
	}
	return u(*p)
}

// The report of a store that holds an NVML device, NVML's processes, an
// agent with counters, a layout, rows with a ledger and an end row's
// verdict, and an OOM: every figure where it was put.
func TestReportOfAStore(t *testing.T) {
	st := newStore()
	st.AddNVML(0, t0+ms, 10*gib, gib)
	st.SetProcs(0, t0+ms, []wire.Proc{{PID: pid, Name: "python3", Used: 6 * gib}, {PID: 999, Name: "other\x1b[31m", UsedUnknown: true}})
	st.AgentHello(hello(pid, 0))
	st.AgentSample(pid, wire.Sample{T: t0 + 2*ms, Dev: 0, Allocated: 3 * gib, Reserved: 4 * gib, Peak: 5 * gib, Inactive: 7, AllocRetries: 2, OOMs: 1})
	st.AgentLayout(pid, wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: wire.Layout{T: t0 + 3*ms, Segments: 5, Blocks: 9,
		Reserved: 4 * gib, Allocated: 3 * gib, FreeInSegments: gib, LargestFree: gib / 4}})
	led := &wire.Ledger{T: t0 + 4*ms, Allocated: 3 * gib, Reserved: 4 * gib, Params: gib, Grads: gib, Optimizer: gib / 2}
	st.AgentMark(pid, mark(t0+4*ms, "Training start", wire.DevStats{Dev: 0, Allocated: 3 * gib, Reserved: 4 * gib, Peak: 5 * gib, Limit: 40 * gib, Ledger: led}))
	held := &wire.Held{T: t0 + 5*ms, Allocated: gib, Python: gib, Top: []wire.HolderGroup{{Kind: "variable", Name: "model", Bytes: gib, Tensors: 3}}}
	st.AgentMark(pid, mark(t0+5*ms, "After cleanup", wire.DevStats{Dev: 0, Allocated: gib, Reserved: 4 * gib, Peak: 5 * gib, Held: held}))
	st.AgentOOM(pid, wire.OOM{Type: wire.TypeOOM, T: t0 + 6*ms, Dev: 0, Requested: 50 * gib, Free: 2 * gib, Limit: 40 * gib,
		Allocated: 30 * gib, Reserved: 39 * gib, Peak: 39 * gib})

	r := roundTrip(t, Of(st, Options{Source: wire.StatusFromGputop, Now: time.Unix(0, t0+7*ms)}))
	if r.Version != wire.StatusVersion || r.Source != "gputop" || r.T != t0+7*ms {
		t.Fatalf("head: %+v", r)
	}
	if len(r.Devices) != 1 {
		t.Fatalf("devices: %+v", r.Devices)
	}
	d := r.Devices[0]
	if got := fmt.Sprintln(d.Index, d.UUID, d.Name, d.From, opt(d.Total), opt(d.Used), opt(d.Free), d.UsedT); got !=
		fmt.Sprintln(0, uuid, "NVIDIA H200", "nvml", u(80*gib), u(10*gib), u(69*gib), t0+ms) {
		t.Errorf("device: %s", got)
	}
	if len(r.Processes) != 2 || r.ProcessesWhy != "" {
		t.Fatalf("processes: %+v %q", r.Processes, r.ProcessesWhy)
	}
	p0, p1 := r.Processes[0], r.Processes[1]
	if got := fmt.Sprintln(p0.PID, p0.Name, opt(p0.Used), p0.Agent, p0.T, p1.PID, opt(p1.Used), p1.Agent); got !=
		fmt.Sprintln(pid, "python3", u(6*gib), true, t0+ms, 999, "absent", false) {
		t.Errorf("processes: %s", got)
	}
	if strings.Contains(p1.Name, "\x1b") {
		t.Errorf("a process name reached the report unsanitised: %q", p1.Name)
	}

	if len(r.Agents) != 1 || len(r.Agents[0].Devices) != 1 {
		t.Fatalf("agents: %+v", r.Agents)
	}
	a := r.Agents[0]
	if a.PID != pid || a.Name != "train.py" || a.Torch != "2.11.0" || !a.Connected {
		t.Errorf("agent: %+v", a)
	}
	ad := a.Devices[0]
	if got := fmt.Sprintln(ad.Dev, ad.TorchDev, ad.T, opt(ad.Allocated), opt(ad.Reserved), opt(ad.Peak), opt(ad.Inactive), opt(ad.AllocRetries), opt(ad.OOMs), opt(ad.Limit)); got !=
		fmt.Sprintln(0, 0, t0+2*ms, u(3*gib), u(4*gib), u(5*gib), 7, 2, 1, u(40*gib)) {
		t.Errorf("agent's counters: %s", got)
	}
	if l := ad.Layout; l == nil || l.Segments != 5 || l.Blocks != 9 || l.FreeInSegments != gib || l.LargestFree != gib/4 || l.Fragmentation != 0.75 {
		t.Errorf("layout: %+v", ad.Layout)
	}
	if ad.Ledger == nil || ad.Ledger.Row != 1 || ad.Ledger.T != t0+4*ms {
		t.Fatalf("ledger: %+v", ad.Ledger)
	}
	parts := map[string]string{}
	for _, p := range ad.Ledger.Parts {
		parts[p.Name] = opt(p.Bytes) + p.Why
	}
	want := map[string]string{"params": u(gib), "grads": u(gib), "optimizer": u(gib / 2), "activations": "0", "other_tensors": "0",
		"workspace": "0", "unattributed": u(gib / 2), "cached_free": u(gib), "outside_torch": u(2 * gib)}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Errorf("ledger parts %v, want %v", parts, want)
	}

	if len(r.Rows) != 3 || r.RowsLeftOut != 0 {
		t.Fatalf("rows: %+v", r.Rows)
	}
	start, end, oomRow := r.Rows[0], r.Rows[1], r.Rows[2]
	if start.Label != "Training start" || opt(start.Allocated) != u(3*gib) || opt(start.Limit) != u(40*gib) || start.Verdict != nil || start.End {
		t.Errorf("first row: %+v", start)
	}
	if !end.End || end.Verdict == nil || end.Verdict.Status != "held" || end.Verdict.Mark != "✗" ||
		!strings.Contains(end.Verdict.Text, "model") || end.Verdict.Basis == "" || !strings.Contains(end.Verdict.Baseline, "Training start") {
		t.Errorf("end row: %+v %+v", end, end.Verdict)
	}
	if oomRow.Source != wire.SourceOOM || oomRow.Kind != wire.MarkOOM || opt(oomRow.Allocated) != u(30*gib) {
		t.Errorf("OOM row: %+v", oomRow)
	}

	if len(r.OOMs) != 1 || r.OOMsWhy != "" {
		t.Fatalf("ooms: %+v", r.OOMs)
	}
	o := r.OOMs[0]
	if got := fmt.Sprintln(o.Row, o.T, o.Dev, o.PID, opt(o.Requested), opt(o.Free), opt(o.Limit), o.Allocated, o.Reserved, o.Peak); got !=
		fmt.Sprintln(oomRow.ID, t0+6*ms, 0, pid, u(50*gib), u(2*gib), u(40*gib), 30*gib, 39*gib, 39*gib) {
		t.Errorf("oom: %s", got)
	}
	if e := o.Explanation; e == nil || !strings.Contains(e.Asked, "asked for 50.00 GiB") || !strings.Contains(e.Cause, "set_per_process_memory_fraction") || e.Where == "" {
		t.Errorf("explanation: %+v", o.Explanation)
	}
	if r.AgentsWhy != "" || r.RowsWhy != "" || r.DevicesWhy != "" {
		t.Errorf("a list with entries says why it is empty: %q %q %q", r.AgentsWhy, r.RowsWhy, r.DevicesWhy)
	}
}

// From one NVML reading: devices and processes, and the other lists empty
// (not null) with the reason.
func TestReportOfOneNVMLReading(t *testing.T) {
	st := newStore()
	st.AddNVML(0, t0, 2*gib, 0)
	r := Of(st, Options{Source: wire.StatusFromNVML})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"source":"nvml"`, `"agents":[]`, `"rows":[]`, `"ooms":[]`, `"processes":[]`,
		`"agents_why":"no gputop is running`, `"rows_why":"no gputop is running`, `"ooms_why":"no gputop is running`,
		`"processes_why":"NVML lists no process`, `"used":2147483648`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

// Each list past its bound keeps its newest (agents: the connected
// first) and counts the rest.
func TestReportBounds(t *testing.T) {
	st := newStore()
	for i := range wire.MaxStatusAgents + 6 {
		st.AgentHello(hello(1000+i, 0))
		if i < 6 {
			st.AgentEnded(1000+i, t0+int64(i), true, "bye")
		}
	}
	for i := range wire.MaxStatusRows + 36 {
		st.AgentMark(1010, mark(t0+int64(i+1)*ms, fmt.Sprintf("step %d", i), wire.DevStats{Dev: 0, Allocated: uint64(i)}))
	}
	for i := range wire.MaxStatusOOMs + 4 {
		st.AgentOOM(1010, wire.OOM{Type: wire.TypeOOM, T: t0 + int64(200+i)*ms, Dev: 0, Requested: uint64(i + 1)})
	}
	r := roundTrip(t, Of(st, Options{Source: wire.StatusFromGputop}))
	if len(r.Agents) != wire.MaxStatusAgents || r.AgentsLeftOut != 6 {
		t.Errorf("%d agents, %d left out", len(r.Agents), r.AgentsLeftOut)
	}
	for _, a := range r.Agents {
		if !a.Connected {
			t.Errorf("an ended agent (pid %d) listed while connected ones were left out", a.PID)
		}
	}
	// 100 marks and 20 OOMs make 120 rows: the newest 64
	if len(r.Rows) != wire.MaxStatusRows || r.RowsLeftOut != 120-wire.MaxStatusRows {
		t.Errorf("%d rows, %d left out", len(r.Rows), r.RowsLeftOut)
	}
	if last := r.Rows[len(r.Rows)-1]; last.Source != wire.SourceOOM || last.T != t0+219*ms {
		t.Errorf("the newest row is not last: %+v", last)
	}
	if len(r.OOMs) != wire.MaxStatusOOMs || r.OOMsLeftOut != 4 || opt(r.OOMs[0].Requested) != "5" || opt(r.OOMs[15].Requested) != "20" {
		t.Errorf("%d ooms, %d left out, first %+v", len(r.OOMs), r.OOMsLeftOut, r.OOMs[0])
	}
}

// An agent with more devices than a report lists: the first in torch's
// order, the rest counted.
func TestReportAgentDevicesBound(t *testing.T) {
	st := newStore()
	var devs []int
	for i := range wire.MaxStatusAgentDevices + 3 {
		devs = append(devs, i)
	}
	st.AgentHello(hello(pid, devs...))
	r := Of(st, Options{Source: wire.StatusFromGputop})
	a := r.Agents[0]
	if len(a.Devices) != wire.MaxStatusAgentDevices || a.DevicesLeftOut != 3 || a.Devices[0].TorchDev != 0 {
		t.Errorf("%d devices, %d left out", len(a.Devices), a.DevicesLeftOut)
	}
}

// A report at every bound, each text at the longest the store keeps
// (labels, names) or longer, fits the reply line a client reads.
func TestFullReportFitsTheReplyBound(t *testing.T) {
	text := func(n int) string { return strings.Repeat("é", n/2) }
	v := gib
	r := wire.StatusReport{Version: wire.StatusVersion, Source: wire.StatusFromGputop, T: t0, Socket: text(108)}
	for i := range store.MaxDevices {
		r.Devices = append(r.Devices, wire.StatusDevice{Index: i, UUID: text(96), Name: text(256), Host: text(256), From: "nvml",
			Total: &v, Used: &v, Free: &v, UsedT: t0, Error: text(256)})
	}
	for i := range wire.MaxStatusProcesses {
		r.Processes = append(r.Processes, wire.StatusProcess{Dev: i, PID: 1 << 21, Key: text(64), Name: text(256), Used: &v, T: t0, Agent: true})
	}
	for range wire.MaxStatusAgents {
		a := wire.StatusAgent{PID: 1 << 21, Key: text(64), Name: text(256), Torch: text(256), EndedAt: t0, EndReason: text(512), DevicesLeftOut: 48}
		for i := range wire.MaxStatusAgentDevices {
			l := &wire.StatusLedger{Row: 1 << 40, T: t0}
			for range 9 {
				l.Parts = append(l.Parts, wire.StatusPart{Name: "other_tensors", Bytes: &v, Why: text(256)})
			}
			a.Devices = append(a.Devices, wire.StatusAgentDevice{Dev: i, TorchDev: i, T: t0, Allocated: &v, Reserved: &v, Peak: &v,
				Inactive: &v, AllocRetries: &v, OOMs: &v, Limit: &v, Layout: &wire.StatusLayout{T: t0, Fragmentation: 0.123456789}, Ledger: l})
		}
		r.Agents = append(r.Agents, a)
	}
	for range wire.MaxStatusRows {
		r.Rows = append(r.Rows, wire.StatusRow{ID: 1 << 40, T: t0, Label: text(wire.MaxLabelBytes), PID: 1 << 21, Key: text(64),
			Source: "agent", Kind: "phase_start", End: true, Allocated: &v, Reserved: &v, Peak: &v, NVMLUsed: &v, NVMLPeak: &v, Limit: &v,
			Verdict: &wire.StatusVerdict{Status: "unknown", Mark: "?", Text: text(4096), Basis: text(64), Baseline: text(512)}})
	}
	for range wire.MaxStatusOOMs {
		r.OOMs = append(r.OOMs, wire.StatusOOM{Row: 1 << 40, T: t0, PID: 1 << 21, Key: text(64), Requested: &v, Free: &v, Limit: &v,
			Explanation: &wire.StatusExplanation{Asked: text(1024), Cause: text(2048), Fix: text(2048), Where: text(1024)}})
	}
	b, err := json.Marshal(wire.Reply{Type: wire.TypeReply, OK: true, Status: &r})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= wire.MaxStatusBytes {
		t.Fatalf("a full report's reply is %d bytes; the client reads at most %d", len(b), wire.MaxStatusBytes)
	}
	t.Logf("a full report's reply: %d bytes of %d", len(b), wire.MaxStatusBytes)
}

// Text from a socket is made printable, every string of the report.
func TestCleanReachesEveryString(t *testing.T) {
	bad := "x\x1b]52;c;AAAA\x07y\u202e"
	r := wire.StatusReport{Source: bad, Devices: []wire.StatusDevice{{Name: bad}},
		Agents: []wire.StatusAgent{{Name: bad, Devices: []wire.StatusAgentDevice{{Ledger: &wire.StatusLedger{Parts: []wire.StatusPart{{Why: bad}}}}}}},
		Rows:   []wire.StatusRow{{Label: bad, Verdict: &wire.StatusVerdict{Text: bad}}},
		OOMs:   []wire.StatusOOM{{Explanation: &wire.StatusExplanation{Cause: bad}}}}
	Clean(&r)
	b, _ := json.Marshal(r)
	if bytes.Contains(b, []byte(`\u001b`)) || bytes.Contains(b, []byte(`\u0007`)) || bytes.Contains(b, []byte("\u202e")) {
		t.Errorf("unsafe text left: %s", b)
	}
	if c := bytes.Count(b, []byte("x")); c < 6 {
		t.Errorf("text lost with the escapes: %s", b)
	}
}

// The text form: one line per device, process, agent device, row and OOM,
// each list's reason where it is empty.
func TestText(t *testing.T) {
	st := newStore()
	st.AddNVML(0, t0, 2*gib, 0)
	var b strings.Builder
	if err := Text(&b, Of(st, Options{Source: wire.StatusFromNVML, Now: time.Unix(0, t0)})); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"from one NVML reading", "NVIDIA H200", "2.00 GiB", "78.00 GiB", "80.00 GiB", NoAgentsFromNVML, NoRowsFromNVML, NoOOMsFromNVML} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}
