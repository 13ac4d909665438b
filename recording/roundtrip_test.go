package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func TestRoundTrip(t *testing.T) {
	path := tempPath(t, "run.gputop")
	live := record(t, path, 3000)

	loaded := store.New(replayOptions())
	info, err := Load(path, loaded)
	if err != nil {
		t.Fatal(err)
	}
	sameStore(t, live, loaded)
	// a process's place in its job comes back with its hello
	for _, a := range loaded.Agents() {
		if want := (wire.Place{Rank: 3, LocalRank: 1, WorldSize: 8, Job: "run-7"}); a.Hello.PID == 4242 && a.Place != want {
			t.Errorf("pid 4242 loaded with place %+v, want %+v", a.Place, want)
		}
	}

	data := readFile(t, path)
	if info.Bytes != int64(len(data)) {
		t.Errorf("Info.Bytes = %d, file has %d", info.Bytes, len(data))
	}
	if info.Samples != 2*3000 {
		t.Errorf("Info.Samples = %d, want 6000", info.Samples)
	}
	if info.Skipped != 0 {
		t.Errorf("Info.Skipped = %d", info.Skipped)
	}
	if want := len(lines(data)) - 1; info.Frames != want {
		t.Errorf("Info.Frames = %d, want %d (lines after the header)", info.Frames, want)
	}
	if info.Header.Comment != "synthetic" || info.Header.V != FormatVersion || info.Header.Start != base {
		t.Errorf("header = %+v", info.Header)
	}
	if info.Start > live.Start() || info.End != live.End() {
		t.Errorf("Info span %d..%d, store %d..%d", info.Start, info.End, live.Start(), live.End())
	}

	// the OOM is in the file once, as its oom frame; its table row comes
	// back through AgentOOM, with the same NVML figures
	if n := bytes.Count(data, []byte(`"source":"oom"`)); n != 0 {
		t.Errorf("the OOM row was written %d times; want it recreated from the oom frame", n)
	}
	var ooms int
	for _, r := range loaded.Rows() {
		if r.Source == "oom" {
			ooms++
			if r.NVMLUsed == nil || r.NVMLPeak == nil || *r.NVMLPeak < 4<<30 {
				t.Errorf("OOM row lacks NVML figures or the spike before it: %s", js(r))
			}
		}
	}
	if ooms != 1 {
		t.Errorf("%d OOM rows after loading, want 1", ooms)
	}
	for _, a := range loaded.Agents() {
		if a.Hello.PID == 5151 && a.OOMs != 1 {
			t.Errorf("agent 5151 has %d OOMs, want 1", a.OOMs)
		}
	}
	// a mark is never a line of its own: it is stored as the rows it made
	if bytes.Contains(data, []byte(`"type":"mark"`)) {
		t.Error("a mark frame was written")
	}
	// end rows come back with their attribution: from the mark, from a
	// late answer (a held frame), or why there is none
	var ends []string
	for _, r := range loaded.Rows() {
		if r.End {
			what := "no attribution"
			switch {
			case r.Held == nil:
			case r.Held.Skipped != "":
				what = r.Held.Skipped
			default:
				what = fmt.Sprintf("python %d internal %d", r.Held.Python, r.Held.Internal)
			}
			ends = append(ends, fmt.Sprintf("%s/%d/%d: %s", r.Label, r.Dev, r.PID, what))
		}
	}
	if got := strings.Join(ends, "; "); !strings.Contains(got, "check/1/4242: python") ||
		!strings.Contains(got, "check/2/4242: could not ask for a holders walk: pid 4242 is not reading requests") ||
		!strings.Contains(got, "After cleanup/1/4242: python 0 internal") || !strings.Contains(got, "eval (end)/1/4242: no attribution") {
		t.Errorf("end rows after loading: %s", got)
	}
	if n := bytes.Count(data, []byte(`"type":"held"`)); n != 2 {
		t.Errorf("%d held frames, want 2 (the answer, the failed request)", n)
	}
	// the device only the agent sees keeps its source
	if d := loaded.Devices(); len(d) != 3 || d[2].Source != "agent" || d[0].Source != "nvml" {
		t.Errorf("devices: %+v", d)
	}
}

// A recording exported twice (live store, loaded store) gives the same rows.
func TestRoundTripExport(t *testing.T) {
	path := tempPath(t, "run.gputop")
	live := record(t, path, 3000)
	// export loads into a store with default options
	st := store.New(store.DefaultOptions())
	if _, err := Load(path, st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.Rows(), st.Rows()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Rows()), js(st.Rows()))
	}
	if len(st.Rows()) < 10 {
		t.Fatalf("only %d rows", len(st.Rows()))
	}
}

// A stream that also holds the store's OOM row (every tap frame written
// as it came) loads with the row once.
func TestLoadOOMRowNotDoubled(t *testing.T) {
	var buf bytes.Buffer
	writeLines(&buf, header(),
		wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30},
		wire.Hello{Type: wire.TypeHello, V: 1, PID: 9, T: base, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}},
		wire.OOM{Type: wire.TypeOOM, PID: 9, T: base + 5, Dev: 0, Allocated: 1, Reserved: 2, Peak: 3},
		wire.Row{Type: wire.TypeRow, T: base + 5, Label: "OOM", Dev: 0, PID: 9, Source: "oom", Allocated: u64(1), Reserved: u64(2), Peak: u64(3)},
		wire.Row{Type: wire.TypeRow, T: base + 6, Label: "after", Dev: 0, PID: 9, Source: "agent", Allocated: u64(1), Reserved: u64(2), Peak: u64(3)},
	)
	st := store.New(store.DefaultOptions())
	if _, err := LoadReader("oom", &buf, st); err != nil {
		t.Fatal(err)
	}
	rows := st.Rows()
	if len(rows) != 2 || rows[0].Source != "oom" || rows[1].Label != "after" {
		t.Fatalf("rows: %s", js(rows))
	}
	var kinds []string
	for _, m := range st.Markers() {
		kinds = append(kinds, m.Kind)
	}
	if strings.Join(kinds, ",") != "oom,snapshot" {
		t.Errorf("marker kinds %v, want oom,snapshot", kinds)
	}
}

func writeLines(buf *bytes.Buffer, frames ...any) {
	for _, f := range frames {
		if h, ok := f.(wire.Recording); ok {
			h.Type, h.V = wire.TypeRecording, FormatVersion
			f = h
		}
		b, err := json.Marshal(f)
		if err != nil {
			panic(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
}

// Extreme values survive the delta encoding exactly.
func TestNVMLExtremeValues(t *testing.T) {
	vals := []uint64{0, math.MaxUint64, 1 << 63, 1<<63 - 1, 5, math.MaxUint64 - 1, 0, 1 << 40}
	path := tempPath(t, "x.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		// times going backwards too: the store clamps, the file keeps them
		tt := base + int64(i)*ms
		if i == 3 {
			tt -= 3 * ms
		}
		w.NVML(2, tt, v, math.MaxUint64-v)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []wire.NVML
	for _, l := range lines(readFile(t, path))[1:] {
		var f wire.NVML
		if err := json.Unmarshal(l, &f); err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	var i int
	for _, f := range got {
		tt, u, r := f.T0, uint64(0), uint64(0)
		for j := range f.DT {
			tt += f.DT[j]
			u += uint64(f.Used[j])
			r += uint64(f.Reserved[j])
			want := base + int64(i)*ms
			if i == 3 {
				want -= 3 * ms
			}
			if u != vals[i] || r != math.MaxUint64-vals[i] || tt != want || f.Dev != 2 {
				t.Errorf("sample %d: dev %d t %d used %d reserved %d, want t %d used %d", i, f.Dev, tt, u, r, want, vals[i])
			}
			i++
		}
	}
	if i != len(vals) {
		t.Fatalf("%d samples in the file, want %d", i, len(vals))
	}
	st := store.New(replayOptions())
	if _, err := Load(path, st); err != nil {
		t.Fatal(err)
	}
	if v, tt, _ := st.Latest(store.Key{Dev: 2, Metric: store.NVMLUsed}); v != 1<<40 || tt != base+7*ms {
		t.Errorf("latest %d@%d", v, tt)
	}
	if c := st.Columns(store.Key{Dev: 2, Metric: store.NVMLUsed}, base, base+8*ms, 1); c[0].Max != math.MaxUint64 || c[0].Min != 0 {
		t.Errorf("column %+v", c[0])
	}
}

// The recorder's batch encoding is exactly what encoding/json makes of
// the wire.NVML it stands for.
func TestBatchEncodingMatchesWire(t *testing.T) {
	b := &batch{}
	b.reset(3, base, 100, 7)
	b.add(base+ms, 100, 7)
	b.add(base+2*ms+17, 50, 9)
	b.add(base+2*ms, math.MaxUint64, 0)
	got := batchLine(b)
	want, _ := json.Marshal(wire.NVML{Type: wire.TypeNVML, Dev: 3, T0: base,
		DT:       []int64{0, ms, ms + 17, -17},
		Used:     []int64{100, 0, -50, -51}, // MaxUint64-50 as a wrapped delta
		Reserved: []int64{7, 0, 2, -9}})
	if string(got) != string(want) {
		t.Fatalf("\n got  %s\n want %s", got, want)
	}
}

// The embedded demo, a real H200 training run recorded in format version 1
// (agent samples one line each), loaded into a store that records again:
// the version 2 file loads to the same store, and is smaller.
func TestRerecordRealRecording(t *testing.T) {
	const src = "../demo/demo.gputop"
	v1 := readFile(t, src)
	first := store.New(liveOptions())
	out := tempPath(t, "v2.gputop")
	info, err := LoadReader(src, bytes.NewReader(v1), first)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Create(out, info.Header)
	if err != nil {
		t.Fatal(err)
	}
	again := tap(store.New(liveOptions()), w)
	if _, err := LoadInto(src, bytes.NewReader(v1), again.in); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	v2 := readFile(t, out)
	if bytes.Contains(v2, []byte(`"type":"sample",`)) || !bytes.Contains(v2, []byte(`"type":"samples",`)) {
		t.Fatal("the agent's samples are not batched")
	}
	loaded := store.New(liveOptions())
	if _, err := LoadReader(out, bytes.NewReader(v2), loaded); err != nil {
		t.Fatal(err)
	}
	sameStore(t, first, loaded)
	t.Logf("%s: %d bytes in version 1, %d in version 2 (%d NVML samples, %d agent samples)",
		src, len(v1), len(v2), info.Samples, w.Stats().AgentSamples)
	if len(v2) >= len(v1) {
		t.Fatalf("version 2 is %d bytes, version 1 %d", len(v2), len(v1))
	}
}
