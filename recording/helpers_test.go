package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// base is a fixed start time (2025-10-09) so tests are reproducible.
const base = int64(1_760_000_000_000_000_000)

const ms = int64(1_000_000)

func liveOptions() store.Options { return store.DefaultOptions() }

// replayOptions mirrors what gputop uses for a replay: the same tiers, a
// larger raw ring.
func replayOptions() store.Options {
	o := store.DefaultOptions()
	o.RawCapacity = 2_000_000
	return o
}

func header() wire.Recording {
	return wire.Recording{Start: base, Host: "testhost", Tool: "gputop test", RateHz: 1000, Comment: "synthetic"}
}

func u64(v uint64) *uint64 { return &v }

// session drives a store through a synthetic run: two NVML devices sampled
// at 1 kHz for n milliseconds with steps, 5 ms spikes and jitter, NVML
// process lists, two agent processes (one of them on a device NVML does not
// see, one killed), snapshots from code, keys and the shell, phases, an OOM,
// a holders report and a device error.
func session(st tapped, n int) {
	rng := rand.New(rand.NewSource(1))
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: 150_000_000_000, Source: "nvml"})
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H200", Total: 150_000_000_000, Source: "nvml"})
	hello := wire.Hello{Type: wire.TypeHello, V: 1, PID: 4242, Host: "testhost", Argv: []string{"python", "train.py"},
		Torch: "2.11.0", RateHz: 100, Rank: "3", LocalRank: "1", WorldSize: "8", Job: "run-7", Devices: []wire.AgentDevice{
			{Index: 0, UUID: "GPU-bbbb", Name: "NVIDIA H200", Total: 150_000_000_000},
			{Index: 1, UUID: "GPU-cccc", Name: "NVIDIA H200 (hidden)", Total: 150_000_000_000},
		}}
	var alloc, resv, peak uint64 = 0, 0, 0
	used := []uint64{600 << 20, 1 << 30}
	const reserved = 537_919_488
	for i := 0; i < n; i++ {
		t := base + int64(i)*ms + rng.Int63n(80_000) - 40_000 // sampler jitter
		switch {
		case i%400 == 0:
			used[0] += uint64(rng.Intn(64)) << 20 // allocation steps
		case i%400 == 200 && used[0] > 700<<20:
			used[0] -= 32 << 20
		}
		u0 := used[0]
		if i%250 >= 100 && i%250 < 105 {
			u0 += 4 << 30 // a 5 ms spike
		}
		st.AddNVML(0, t, u0, reserved)
		st.AddNVML(1, t+1234, used[1]+uint64(i%7), reserved)
		if i%100 == 0 {
			st.SetProcs(0, t, []wire.Proc{{PID: 4242, Name: "python", Used: u0 - 500<<20}, {PID: 777, Name: "Xorg", Used: 4 << 20}})
			st.SetProcs(1, t, []wire.Proc{{PID: 4242, Name: "python", Used: used[1]}})
		}
		switch i {
		case 10:
			h := hello
			h.T = t
			st.AgentHello(h)
		case 2000:
			st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 5151, T: t, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200"}}})
		}
		if i > 10 && i%10 == 0 && i <= 2900 {
			alloc = uint64(200<<20) + uint64(i)*4096
			resv = alloc + 64<<20
			peak = max(peak, alloc+uint64(rng.Intn(1<<20)))
			st.AgentSample(4242, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: alloc, Reserved: resv, Peak: peak, Inactive: 1234})
			st.AgentSample(4242, wire.Sample{Type: wire.TypeSample, T: t, Dev: 1, Allocated: alloc / 2, Reserved: resv / 2, Peak: peak / 2})
		}
		if i > 2000 && i < 2500 && i%20 == 0 {
			st.AgentSample(5151, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: 1 << 20, Reserved: 2 << 20, Peak: 3 << 20})
		}
		devs := []wire.DevStats{{Dev: 0, Allocated: alloc, Reserved: resv, Peak: peak}, {Dev: 1, Allocated: alloc / 2, Reserved: resv / 2, Peak: peak / 2}}
		switch i {
		case 500:
			st.AgentMark(4242, wire.Mark{Type: wire.TypeMark, T: t, Label: "Training start", Devs: devs})
		case 800:
			st.TakeSnapshot("snapshot 1", 0, t, "key", nil)
		case 1000:
			st.AgentMark(4242, wire.Mark{Type: wire.TypeMark, T: t, Label: "eval", Kind: wire.MarkPhaseStart, Devs: devs})
		case 1200:
			st.AgentMark(4242, wire.Mark{Type: wire.TypeMark, T: t, Label: "eval", Kind: wire.MarkPhaseEnd, Devs: devs})
		case 2203:
			// the OOM event's time lies a little before gputop hears of it
			st.AgentOOM(5151, wire.OOM{Type: wire.TypeOOM, T: t - 2*ms, Dev: 0, Requested: 8 << 30, Free: 1 << 30, Allocated: alloc, Reserved: resv, Peak: peak})
		case 1600:
			st.AgentHolders(4242, wire.Holders{Type: wire.TypeHolders, T: t, Dev: 0, Total: 3 << 20, Skipped: 1, TookMS: 3.5,
				Groups: []wire.HolderGroup{{Kind: "container", Name: "losses", Bytes: 3 << 20, Tensors: 12, Examples: []string{"float32[512, 1000]"}, Hint: "losses.append(loss.item())"}}})
		case 1700:
			st.SetDeviceError(1, t, "GPU is lost")
		case 1800:
			st.SetDeviceError(1, t, "")
		case 2500:
			st.AgentEnded(5151, t, false, "connection reset by peer")
		case 2700:
			st.AddRow(wire.Row{T: t, Label: "imported", Dev: 0, Source: "cli", Allocated: u64(1), Reserved: u64(2), Peak: u64(3)})
		case 2600:
			// an end row from a key: the agent is asked for a walk of
			// each device; one request cannot be sent, one is answered
			st.SetAsker(func(pid, dev int) error {
				if dev == 1 {
					return errors.New("pid 4242 is not reading requests")
				}
				return nil
			})
			st.TakeSnapshot("check", 1, t, "key", &[]bool{true}[0]) // torch cuda:0
			st.TakeSnapshot("check", 2, t, "key", &[]bool{true}[0]) // torch cuda:1
		case 2650:
			st.AgentHolders(4242, wire.Holders{Type: wire.TypeHolders, T: t, Dev: 0, Groups: []wire.HolderGroup{},
				Held: &wire.Held{T: t - ms, Allocated: alloc, Python: alloc - 32<<20, Internal: 32 << 20, Workspaces: 1,
					Top: []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: alloc - 32<<20, Tensors: 6}}}})
		case 2900:
			devs[0].Held = &wire.Held{T: t, Allocated: alloc, Internal: alloc, Workspaces: 2, TookMS: 41.5}
			st.AgentMark(4242, wire.Mark{Type: wire.TypeMark, T: t, Label: "After cleanup", Devs: devs})
			st.AgentEnded(4242, t, true, "")
		case n - 10:
			st.TakeSnapshot("from the shell", 1, t, "cli", nil)
		}
	}
}

// record runs session through a store with a Writer as its tap.
func record(t testing.TB, path string, n int) *store.Store {
	t.Helper()
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	st := tap(store.New(liveOptions()), w)
	session(st, n)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return st.Store
}

// sameStore fails unless b holds what a holds: every series sample for
// sample, devices, processes, agents, rows and markers.
func sameStore(t *testing.T, a, b *store.Store) {
	t.Helper()
	if !reflect.DeepEqual(a.Keys(), b.Keys()) {
		t.Fatalf("series differ:\n live   %v\n loaded %v", a.Keys(), b.Keys())
	}
	from, to := a.Start(), a.End()+1
	if a.Start() != b.Start() || a.End() != b.End() {
		t.Errorf("span: live %d..%d, loaded %d..%d", a.Start(), a.End(), b.Start(), b.End())
	}
	for _, k := range a.Keys() {
		if a.Count(k) != b.Count(k) {
			t.Errorf("%v: %d samples live, %d loaded", k, a.Count(k), b.Count(k))
		}
		av, at, _ := a.Latest(k)
		bv, bt, _ := b.Latest(k)
		if av != bv || at != bt {
			t.Errorf("%v: latest %d@%d live, %d@%d loaded", k, av, at, bv, bt)
		}
		for _, n := range []int{1, 7, 300, int((to - from) / ms * 4)} {
			if ac, bc := a.Columns(k, from, to, n), b.Columns(k, from, to, n); !reflect.DeepEqual(ac, bc) {
				t.Errorf("%v: %d columns differ", k, n)
			}
		}
		// every 100 µs across the run, so each sample's value is compared
		for tt := from; tt < to; tt += ms / 10 {
			av, aok := a.ValueAt(k, tt)
			bv, bok := b.ValueAt(k, tt)
			if av != bv || aok != bok {
				t.Fatalf("%v at %d: live %d,%v loaded %d,%v", k, tt, av, aok, bv, bok)
			}
		}
	}
	// the loader sets each device's achieved rate from the samples; the
	// rest of a device is as it was
	ad, bd := a.Devices(), b.Devices()
	for i := range bd {
		if bd[i].Source == "nvml" && (bd[i].Rate < 900 || bd[i].Rate > 1100) {
			t.Errorf("device %d: loaded rate %.1f/s, want about 1000", i, bd[i].Rate)
		}
		bd[i].Rate = 0
	}
	for i := range ad {
		ad[i].Rate = 0 // set by a loader too, when a is itself loaded
	}
	if !reflect.DeepEqual(ad, bd) {
		t.Errorf("devices:\n live   %+v\n loaded %+v", ad, bd)
	}
	for dev := range a.Devices() {
		ap, at := a.Procs(dev)
		bp, bt := b.Procs(dev)
		if !reflect.DeepEqual(ap, bp) || at != bt {
			t.Errorf("procs of device %d: live %v@%d, loaded %v@%d", dev, ap, at, bp, bt)
		}
	}
	if !reflect.DeepEqual(a.Agents(), b.Agents()) {
		t.Errorf("agents:\n live   %+v\n loaded %+v", a.Agents(), b.Agents())
	}
	as, bs := a.Rows(), b.Rows()
	if !reflect.DeepEqual(as, bs) {
		t.Errorf("rows differ:\n live   %s\n loaded %s", js(as), js(bs))
	}
	// rows carry their marker kind, so phase markers come back as such
	am, bm := a.Markers(), b.Markers()
	if !reflect.DeepEqual(am, bm) {
		t.Errorf("markers:\n live   %+v\n loaded %+v", am, bm)
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// lines splits a recording into its lines, each with its newline.
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

func asFormatError(t *testing.T, err error) *FormatError {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("want a *FormatError, got %T: %v", err, err)
	}
	return fe
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchLine is the line the Writer writes for b, without its newline.
func batchLine(b *batch) []byte {
	f := b.frame()
	return f.AppendJSON(nil)
}

// newLogged is a store whose notes go to a log of its own, found again
// with logOf, as main gives the store and the UI one log.
func newLogged(opt store.Options) *store.Store {
	b := logbook.New()
	opt.Log = b.Add
	st := store.New(opt)
	logsMu.Lock()
	logs[st] = b
	logsMu.Unlock()
	return st
}

func logOf(st *store.Store) *logbook.Book {
	logsMu.Lock()
	defer logsMu.Unlock()
	return logs[st]
}

var (
	logsMu sync.Mutex
	logs   = map[*store.Store]*logbook.Book{}
)

// tapped is a store fed through an Ingest whose Tap is a Writer, as gputop
// records: its mutators are the store's, each routed through the Ingest,
// so a test feeds it the way the sources feed a store, and reads it as the
// store it embeds.
type tapped struct {
	*store.Store
	in *ingest.Ingest
}

// liveH200 is a recording at a new path named name, written through a
// live store fed as the sources feed it, with one H200 (GPU-aaaa) and the
// hello of pid 4242 (python train.py) on it at base.
func liveH200(t *testing.T, name string) (path string, w *Writer, live tapped) {
	t.Helper()
	path = tempPath(t, name)
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	live = tap(store.New(liveOptions()), w)
	live.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: 150 << 30, Source: "nvml"})
	live.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 4242, Argv: []string{"python", "train.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: 150 << 30}}, T: base})
	return path, w, live
}

// tap returns st fed through an Ingest with w as its Tap.
func tap(st *store.Store, w *Writer) tapped {
	in := ingest.New(st)
	in.SetTap(w)
	return tapped{st, in}
}

func (s tapped) SetDevice(d store.Device)                   { s.in.Device(d) }
func (s tapped) AddNVML(dev int, t int64, used, res uint64) { s.in.NVML(dev, t, used, res) }
func (s tapped) AgentHello(h wire.Hello)                    { s.in.Apply(h.PID, h) }
func (s tapped) AgentSample(pid int, smp wire.Sample)       { s.in.Apply(pid, smp) }
func (s tapped) AgentMark(pid int, m wire.Mark) []wire.Row  { return s.in.Apply(pid, m) }
func (s tapped) AgentOOM(pid int, o wire.OOM)               { s.in.Apply(pid, o) }
func (s tapped) AgentHolders(pid int, h wire.Holders)       { s.in.Apply(pid, h) }
func (s tapped) AgentEnded(pid int, t int64, clean bool, reason string) {
	s.in.AgentEnded(pid, t, clean, reason)
}
func (s tapped) SetProcs(dev int, t int64, procs []wire.Proc) {
	s.in.Apply(0, wire.Procs{Type: wire.TypeProcs, T: t, Dev: dev, Procs: procs})
}
func (s tapped) SetDeviceError(dev int, t int64, err string) {
	s.in.Apply(0, wire.DevError{Type: wire.TypeDevError, T: t, Dev: dev, Error: err})
}
func (s tapped) SetAsker(a ingest.Asker) { s.in.SetAsker(a) }
func (s tapped) TakeSnapshot(label string, dev int, t int64, source string, end *bool) []wire.Row {
	return s.in.TakeSnapshot(label, dev, t, source, end)
}
func (s tapped) EditRow(e wire.RowEdit) (wire.Row, bool) {
	rows := s.in.Apply(0, e)
	if len(rows) == 0 {
		return wire.Row{}, false
	}
	return rows[0], true
}
func (s tapped) AddRow(row wire.Row) { s.in.Apply(0, row) }
func (s tapped) SetHeld(pid, dev int, t int64, h *wire.Held) {
	s.in.Apply(pid, wire.RowHeld{Type: wire.TypeRowHeld, PID: pid, T: t, Dev: dev, Held: h})
}
