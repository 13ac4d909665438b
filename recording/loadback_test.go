package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// What the recorder writes, the loader reads. Each case is a random run of
// the ingest calls a live gputop makes, with the values its sources admit:
// the NVML sampler (its devices first, then samples, process lists and
// errors) and the socket server (pids > 0, times within
// wire.MaxClockSkew of the clock, torch indices >= 0 listed once per hello,
// UUIDs never empty, frames whose canonical encoding fits in
// wire.MaxFrameBytes). A Writer records the run; loading the file into a
// fresh store must give the same devices, rows, markers, agents,
// samples and log lines. Runs include hellos with more unknown UUIDs than
// store.MaxDevices allows; TestLoadBackFramesAtTheLimit adds frames at the
// size limit whose text grows when cleaned.
func TestLoadBackEveryRecording(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		loadBack(t, seed, 400)
	}
}

// FuzzLoadBack runs the same check on seeds and lengths the fuzzer picks:
// go test ./recording -run '^$' -fuzz FuzzLoadBack
func FuzzLoadBack(f *testing.F) {
	f.Add(int64(1), uint16(50))
	f.Add(int64(7), uint16(600))
	f.Fuzz(func(t *testing.T, seed int64, n uint16) {
		loadBack(t, seed, int(n%2000))
	})
}

// The limit on devices holds on both sides: hellos with unknown UUIDs past
// store.MaxDevices add no device, the log names the process, and every
// row, including those after the limit was reached, loads back.
func TestLoadBackPastMaxDevices(t *testing.T) {
	path := tempPath(t, "many.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	live := tap(newLogged(store.Options{RawCapacity: 100, KeepGone: 0}), w)
	rows := 0
	for a := 0; a < 30; a++ {
		pid := 1000 + a
		h := wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"/srv/train.py"}, T: base + int64(a)*ms}
		var m wire.Mark
		for i := 0; i < 40; i++ {
			h.Devices = append(h.Devices, wire.AgentDevice{Index: i, UUID: fmt.Sprintf("GPU-%d-%d", a, i), Name: "H"})
			m.Devs = append(m.Devs, wire.DevStats{Dev: i, Allocated: 1})
		}
		live.AgentHello(h)
		m.Type, m.T, m.Label = wire.TypeMark, base+int64(a)*ms+1, fmt.Sprintf("m%d", a)
		rows += len(live.AgentMark(pid, m))
		live.AgentEnded(pid, base+int64(a)*ms+2, true, "bye")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(live.Devices()); n != store.MaxDevices {
		t.Fatalf("%d devices live, want the limit %d", n, store.MaxDevices)
	}
	if rows != store.MaxDevices || len(live.Rows()) != rows {
		t.Fatalf("%d rows made, %d kept; want one per device that has room, %d", rows, len(live.Rows()), store.MaxDevices)
	}
	logs := strings.Join(logOf(live.Store).Lines(), "\n")
	if !strings.Contains(logs, "pid 1025 (train.py): cuda:24, cuda:25") || !strings.Contains(logs, "at most 1024 devices") {
		t.Fatalf("log does not name the process whose devices found no room:\n%s", logs)
	}
	loaded := newLogged(store.Options{RawCapacity: 100, KeepGone: 0})
	info, err := Load(path, loaded)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(loaded.Rows()) != rows {
		t.Fatalf("%d of %d rows loaded (%d frames)", len(loaded.Rows()), rows, info.Frames)
	}
	sameRecorded(t, live.Store, loaded)
}

// The longest lines gputop can be made to record, from frames at the size
// the server admits, fit in a recording line and load back. (A hello is
// not among them: the store keeps its text small, store.MaxArgvBytes.)
func TestLoadBackFramesAtTheLimit(t *testing.T) {
	path := loadBackWith(t, 1, 30, func(g *ingestRun) {
		for len(g.agents) == 0 {
			g.hello()
		}
		for kind := 0; kind < 2; kind++ {
			g.big(kind)
		}
	})
	longest := 0
	for _, l := range lines(readFile(t, path)) {
		longest = max(longest, len(l)-1)
	}
	t.Logf("longest line %d bytes (MaxLineBytes %d)", longest, MaxLineBytes)
	if longest < 3*wire.MaxFrameBytes-1024 {
		t.Fatalf("longest line %d bytes: the frames did not grow as cleaning should make them", longest)
	}
}

// loadBack records one random run of n ingest calls and loads it back.
func loadBack(t *testing.T, seed int64, n int) {
	t.Helper()
	loadBackWith(t, seed, n, nil)
}

// loadBackWith is loadBack with more calls made at the end; it returns
// the recording's path.
func loadBackWith(t *testing.T, seed int64, n int, more func(*ingestRun)) string {
	t.Helper()
	path := tempPath(t, fmt.Sprintf("run-%d.gputop", seed))
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	opt := store.Options{RawCapacity: 500, Tiers: []store.TierSpec{{Width: 100 * time.Millisecond, Buckets: 200}}}
	live := tap(newLogged(opt), w)
	g := newIngest(rand.New(rand.NewSource(seed)), live)
	for i := 0; i < n; i++ {
		g.step()
		if i%64 == 63 {
			w.Flush() // a real disk keeps up; the test must not outrun the queue
		}
	}
	if more != nil {
		more(g)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.DroppedFrames != 0 || s.DroppedSamples != 0 {
		t.Fatalf("seed %d: the writer dropped what the store accepted: %+v", seed, s)
	}
	loaded := newLogged(opt)
	if _, err := Load(path, loaded); err != nil {
		t.Fatalf("seed %d: the recording does not load back: %v", seed, err)
	}
	t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { sameRecorded(t, live.Store, loaded) })
	return path
}

// sameRecorded fails unless b holds what a holds: devices (their sample
// rate aside, which a loader computes), rows, markers, agents,
// each series' count and latest sample, the span and the log.
func sameRecorded(t *testing.T, a, b *store.Store) {
	t.Helper()
	ad, bd := a.Devices(), b.Devices()
	for i := range ad {
		ad[i].Rate = 0
	}
	for i := range bd {
		bd[i].Rate = 0
	}
	if !reflect.DeepEqual(ad, bd) {
		t.Errorf("devices: %d live, %d loaded; first difference: %s", len(ad), len(bd), firstDiff(ad, bd))
	}
	if as, bs := a.Rows(), b.Rows(); !reflect.DeepEqual(as, bs) {
		t.Errorf("rows: %d live, %d loaded; first difference: %s", len(as), len(bs), firstDiff(as, bs))
	}
	if am, bm := a.Markers(), b.Markers(); !reflect.DeepEqual(am, bm) {
		t.Errorf("markers: %d live, %d loaded; first difference: %s", len(am), len(bm), firstDiff(am, bm))
	}
	aa, ba := a.Agents(), b.Agents()
	for _, as := range [][]store.Agent{aa, ba} {
		for i := range as {
			if !as[i].Ended {
				as[i].EndReason = "" // the server says "bye"; a recording's bye frame has no reason
			}
		}
	}
	if !reflect.DeepEqual(aa, ba) {
		t.Errorf("agents: %d live, %d loaded; first difference: %s", len(aa), len(ba), firstDiff(aa, ba))
	}
	if !reflect.DeepEqual(a.Keys(), b.Keys()) {
		t.Errorf("series: %d live, %d loaded", len(a.Keys()), len(b.Keys()))
	}
	for _, k := range a.Keys() {
		av, at, _ := a.Latest(k)
		bv, bt, _ := b.Latest(k)
		if a.Count(k) != b.Count(k) || av != bv || at != bt {
			t.Errorf("%v: %d samples, latest %d@%d live; %d, %d@%d loaded", k, a.Count(k), av, at, b.Count(k), bv, bt)
		}
	}
	if a.Start() != b.Start() || a.End() != b.End() {
		t.Errorf("span: live %d..%d, loaded %d..%d", a.Start(), a.End(), b.Start(), b.End())
	}
	// a label cut on the way in is recorded cut: loading has nothing to cut
	al := slices.DeleteFunc(logOf(a).Lines(), func(l string) bool { return strings.Contains(l, "wire.MaxLabelBytes") })
	if bl := logOf(b).Lines(); !slices.Equal(al, bl) {
		t.Errorf("log: live %q, loaded %q", al, bl)
	}
}

// firstDiff shows the first element in which two slices differ.
func firstDiff[T any](a, b []T) string {
	for i := 0; i < max(len(a), len(b)); i++ {
		if i >= len(a) || i >= len(b) || !reflect.DeepEqual(a[i], b[i]) {
			var x, y any = "none", "none"
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			return clipText(fmt.Sprintf("[%d] live %s, loaded %s", i, js(x), js(y)), 2000)
		}
	}
	return "none"
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ingestRun makes random ingest calls as gputop's sources would.
type ingestRun struct {
	r    *rand.Rand
	st   tapped
	now  int64 // gputop's clock
	nvml int   // NVML devices: indices 0..nvml-1
	uuid int   // agent UUIDs made so far
	// attached agents by pid: the torch indices of their last hello
	agents map[int][]int
	gone   []int
}

func newIngest(r *rand.Rand, st tapped) *ingestRun {
	g := &ingestRun{r: r, st: st, now: base + int64(time.Second), agents: map[int][]int{}}
	// the sampler's devices, then a sample of each
	g.nvml = r.Intn(4)
	for i := 0; i < g.nvml; i++ {
		st.SetDevice(store.Device{Index: i, UUID: fmt.Sprintf("GPU-nvml-%d", i), Name: "NVIDIA H200", Total: 150 << 30, Source: "nvml"})
	}
	for i := 0; i < g.nvml; i++ {
		st.AddNVML(i, g.now, uint64(r.Intn(1<<30)), 512<<20)
	}
	return g
}

// agentTime is a time an agent sends: its clock is gputop's, its frames
// may have waited a little in its queue.
func (g *ingestRun) agentTime() int64 {
	return g.now - g.r.Int63n(int64(2*time.Second)) + g.r.Int63n(int64(100*time.Millisecond))
}

// text is a label or name: plain, with characters that cleaning or JSON
// escaping turns into more bytes, or empty.
func (g *ingestRun) text() string {
	parts := []string{"Epoch 5", "<model>", "a&b", "\x7f", "\u2028", "\x1b[31m", "é", "\u202e", "", "x"}
	var b strings.Builder
	for i := g.r.Intn(4); i >= 0; i-- {
		b.WriteString(parts[g.r.Intn(len(parts))])
	}
	return b.String()
}

func (g *ingestRun) pid() (int, bool) {
	if len(g.agents) == 0 {
		return 0, false
	}
	pids := make([]int, 0, len(g.agents))
	for p := range g.agents {
		pids = append(pids, p)
	}
	// map order is random: sort for a reproducible choice
	for i := 1; i < len(pids); i++ {
		for j := i; j > 0 && pids[j] < pids[j-1]; j-- {
			pids[j], pids[j-1] = pids[j-1], pids[j]
		}
	}
	return pids[g.r.Intn(len(pids))], true
}

// torchDev is one of pid's torch indices, or now and then one its hello
// did not list (the server drops those; the store must ignore them too).
func (g *ingestRun) torchDev(pid int) int {
	devs := g.agents[pid]
	if len(devs) == 0 || g.r.Intn(10) == 0 {
		return g.r.Intn(50)
	}
	return devs[g.r.Intn(len(devs))]
}

func (g *ingestRun) step() {
	r, st := g.r, g.st
	g.now += r.Int63n(int64(20 * time.Millisecond))
	switch op := r.Intn(100); {
	case op < 30 && g.nvml > 0: // the sampler's batch of device samples
		dev := r.Intn(g.nvml)
		t := g.now
		for i := r.Intn(40); i >= 0; i-- {
			st.AddNVML(dev, t, uint64(r.Intn(1<<34)), uint64(r.Intn(1<<30)))
			t += int64(time.Millisecond)
		}
	case op < 33 && g.nvml > 0:
		var procs []wire.Proc
		for i := r.Intn(3); i > 0; i-- {
			procs = append(procs, wire.Proc{PID: 1 + r.Intn(12), Name: g.text(), Used: uint64(r.Intn(1 << 30)), UsedUnknown: r.Intn(8) == 0})
		}
		st.SetProcs(r.Intn(g.nvml), g.now, procs)
	case op < 35 && g.nvml > 0:
		st.SetDeviceError(r.Intn(g.nvml), g.now, []string{"", "GPU is lost"}[r.Intn(2)])
	case op < 45:
		g.hello()
	case op < 70:
		if pid, ok := g.pid(); ok {
			s := wire.Sample{Type: wire.TypeSample, T: g.agentTime(), Dev: g.torchDev(pid),
				Allocated: uint64(r.Int63()), Reserved: uint64(r.Intn(1 << 40)), Peak: uint64(r.Intn(1 << 40))}
			if r.Intn(3) == 0 {
				s.Inactive, s.AllocRetries, s.Dropped = uint64(r.Intn(1<<20)), uint64(r.Intn(3)), uint64(r.Intn(5))
			}
			st.AgentSample(pid, s)
		}
	case op < 78:
		if pid, ok := g.pid(); ok {
			m := wire.Mark{Type: wire.TypeMark, T: g.agentTime(), Label: "m " + g.text(),
				Kind: []string{"", wire.MarkSnapshot, wire.MarkPhaseStart, wire.MarkPhaseEnd}[r.Intn(4)]}
			for i := r.Intn(3); i >= 0; i-- {
				m.Devs = append(m.Devs, wire.DevStats{Dev: g.torchDev(pid), Allocated: uint64(r.Intn(1 << 30)), Reserved: uint64(r.Intn(1 << 31)), Peak: uint64(r.Intn(1 << 31))})
			}
			st.AgentMark(pid, m)
		}
	case op < 81:
		if pid, ok := g.pid(); ok {
			st.AgentOOM(pid, wire.OOM{Type: wire.TypeOOM, T: g.agentTime(), Dev: g.torchDev(pid), Requested: uint64(r.Intn(1 << 35)),
				Free: uint64(r.Intn(1 << 30)), Limit: uint64(r.Intn(1 << 36)), Allocated: uint64(r.Intn(1 << 34)), Reserved: 1, Peak: 2})
		}
	case op < 84:
		if pid, ok := g.pid(); ok {
			st.AgentHolders(pid, wire.Holders{Type: wire.TypeHolders, T: g.agentTime(), Dev: g.torchDev(pid), Total: 3, Skipped: r.Intn(3),
				Groups: []wire.HolderGroup{{Kind: "variable", Name: g.text(), Bytes: 3, Tensors: 1, Examples: []string{g.text()}, Hint: g.text()}}})
		}
	case op < 90:
		if pid, ok := g.pid(); ok {
			clean := r.Intn(2) == 0
			reason := "bye"
			if !clean {
				reason = []string{"connection lost", "closed: line 3: " + g.text()}[r.Intn(2)]
			}
			// the server stamps a lost connection with its clock, a bye with the agent's time
			t := g.now
			if clean {
				t = g.agentTime()
			}
			st.AgentEnded(pid, t, clean, reason)
			delete(g.agents, pid)
			g.gone = append(g.gone, pid)
		}
	case op < 95: // s in the TUI, or gputop snap on every device
		devs := len(st.Devices())
		if devs == 0 {
			return
		}
		// end rows too: with no agent socket to ask, each says so
		var end *bool
		switch r.Intn(3) {
		case 0:
			end = &[]bool{true}[0]
		case 1:
			end = &[]bool{false}[0]
		}
		if r.Intn(2) == 0 || devs > 8 {
			st.TakeSnapshot("key "+g.text(), r.Intn(devs), g.now, "key", end)
		} else {
			for d := 0; d < devs; d++ {
				st.TakeSnapshot("cli "+g.text(), d, g.now, "cli", end)
			}
		}
	}
}

// hello attaches a new agent, reconnects a gone one or updates one's
// devices: UUIDs NVML knows, UUIDs other agents brought, new ones (at
// times hundreds, to pass store.MaxDevices).
func (g *ingestRun) hello() {
	r := g.r
	pid := 100 + r.Intn(20)
	if p, ok := g.pid(); ok && r.Intn(3) == 0 {
		pid = p
	} else if len(g.gone) > 0 && r.Intn(4) == 0 {
		pid = g.gone[r.Intn(len(g.gone))]
	}
	h := wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Host: g.text(), Argv: []string{"/x/" + g.text(), "--lr", g.text()},
		Torch: "2.11.0", Python: "3.12.1", RateHz: 100, T: g.agentTime()}
	n := r.Intn(4)
	if r.Intn(12) == 0 {
		n = 200 + r.Intn(500)
	}
	used, uuids := map[int]bool{}, map[string]bool{}
	var idx []int
	for i := 0; i < n; i++ {
		ti := r.Intn(n + 4)
		var uuid string
		switch c := r.Intn(3); {
		case c == 0 && g.nvml > 0:
			uuid = fmt.Sprintf("GPU-nvml-%d", r.Intn(g.nvml))
		case c == 1 && g.uuid > 0:
			uuid = fmt.Sprintf("GPU-agent-%d", r.Intn(g.uuid))
		default:
			uuid = fmt.Sprintf("GPU-agent-%d", g.uuid)
			g.uuid++
		}
		if used[ti] || uuids[uuid] {
			continue // the server admits each index and each UUID once per hello
		}
		used[ti], uuids[uuid] = true, true
		h.Devices = append(h.Devices, wire.AgentDevice{Index: ti, UUID: uuid, Name: g.text(), Total: uint64(r.Intn(1 << 40))})
		idx = append(idx, ti)
	}
	g.st.AgentHello(h)
	g.agents[pid] = idx
	for i, p := range g.gone {
		if p == pid {
			g.gone = append(g.gone[:i], g.gone[i+1:]...)
			break
		}
	}
}

// big sends a frame at the size limit the server admits (its canonical
// encoding exactly wire.MaxFrameBytes), made of DEL characters, which
// cleaning turns into three bytes each: the longest recorded lines gputop
// can be made to write. kind picks a holders report or a mark (its rows).
func (g *ingestRun) big(kind int) {
	pid, ok := g.pid()
	if !ok {
		return
	}
	fill := func(frame func(s string) any) any {
		// a DEL is one byte in the canonical encoding
		n := wire.MaxFrameBytes - canonicalSize(frame(""))
		f := frame(strings.Repeat("\x7f", n))
		if canonicalSize(f) != wire.MaxFrameBytes {
			panic("big frame not at the limit")
		}
		return f
	}
	t := g.agentTime()
	switch kind {
	case 0:
		f := fill(func(s string) any {
			return wire.Holders{Type: wire.TypeHolders, T: t, Groups: []wire.HolderGroup{{Kind: "other", Name: s}}}
		}).(wire.Holders)
		g.st.AgentHolders(pid, f)
	default:
		dev := g.torchDev(pid)
		f := fill(func(s string) any {
			return wire.Mark{Type: wire.TypeMark, T: t, Label: s, Devs: []wire.DevStats{{Dev: dev}}}
		}).(wire.Mark)
		g.st.AgentMark(pid, f)
	}
}

// canonicalSize is a frame's length in the protocol's canonical encoding.
func canonicalSize(f any) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		panic(err)
	}
	return b.Len() - 1
}
