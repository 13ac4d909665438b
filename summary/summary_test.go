package summary

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func u(v uint64) *uint64 { return &v }

const mib = 1 << 20

func sample() ([]wire.Row, []store.Device) {
	devs := []store.Device{{Index: 0, Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA H200"}}
	snaps := []wire.Row{
		{T: 1e18, Label: "Training start", Dev: 0, PID: 42, Source: "agent", Allocated: u(1 * mib), Reserved: u(2 * mib), Peak: u(1 * mib), NVMLUsed: u(500 * mib)},
		{T: 1e18 + 1, Label: "other device", Dev: 1, NVMLUsed: u(7 * mib), Source: "key"},
		{T: 1e18 + 2, Label: "Epoch 5", Dev: 0, PID: 42, Source: "agent", Allocated: u(13 * mib), Reserved: u(20 * mib), Peak: u(15 * mib), NVMLUsed: u(520 * mib), NVMLPeak: u(530 * mib)},
		{T: 1e18 + 3, Label: "no agent", Dev: 0, Source: "key", NVMLUsed: u(510 * mib)},
		{T: 1e18 + 4, Label: "After cleanup", Dev: 0, PID: 42, Source: "agent", Allocated: u(1 * mib), Reserved: u(2 * mib), Peak: u(1 * mib), NVMLUsed: u(502 * mib),
			End: true, Held: &wire.Held{Allocated: 1 * mib, Internal: 1 * mib, Workspaces: 1}},
	}
	return snaps, devs
}

func TestRowsDeltasPerDevice(t *testing.T) {
	snaps, devs := sample()
	rows := Rows(snaps, devs)
	if rows[0].DAllocated != nil || rows[0].DNVML != nil {
		t.Fatal("first row has no previous row")
	}
	if rows[1].DNVML != nil {
		t.Fatal("device 1's first row must not diff against device 0")
	}
	if got := *rows[2].DAllocated; got != 12*mib {
		t.Fatalf("Epoch 5 allocated delta = %d", got)
	}
	if got := *rows[2].DNVML; got != 20*mib {
		t.Fatalf("Epoch 5 NVML delta = %d", got)
	}
	if rows[3].DAllocated != nil {
		t.Fatal("a row without allocator values has no allocator delta")
	}
	// the row of no agent process is the first of its kind on device 0
	if rows[3].DNVML != nil {
		t.Fatalf("the row of no process diffed against pid 42's: %d", *rows[3].DNVML)
	}
	if got := *rows[4].DNVML; got != -18*mib {
		t.Fatalf("After cleanup NVML delta = %d, want against Epoch 5", got)
	}
	// After cleanup diffs against Epoch 5 (the previous row with allocator values)
	if got := *rows[4].DAllocated; got != -12*mib {
		t.Fatalf("After cleanup allocated delta = %d", got)
	}
	if rows[2].DevName != "NVIDIA H200" {
		t.Fatal(rows[2].DevName)
	}
}

// Two processes on one GPU: each row's deltas and verdict are its own
// process's, never the other's.
func TestRowsPerProcess(t *testing.T) {
	devs := []store.Device{{Index: 0, Name: "NVIDIA H200"}}
	snaps := []wire.Row{
		{T: 1, Label: "Training start", Dev: 0, PID: 10, Allocated: u(0), Reserved: u(0)},
		{T: 1, Label: "Training start", Dev: 0, PID: 20, Allocated: u(100 * mib), Reserved: u(100 * mib)},
		{T: 2, Label: "Epoch 1", Dev: 0, PID: 10, Allocated: u(30 * mib), Reserved: u(40 * mib)},
		{T: 2, Label: "Epoch 1", Dev: 0, PID: 20, Allocated: u(130 * mib), Reserved: u(140 * mib)},
		{T: 3, Label: "After cleanup", Dev: 0, PID: 10, Allocated: u(0), Reserved: u(0), End: true,
			Held: &wire.Held{Allocated: 0}},
		{T: 3, Label: "After cleanup", Dev: 0, PID: 20, Allocated: u(130 * mib), Reserved: u(140 * mib), End: true,
			Held: &wire.Held{Allocated: 130 * mib, Python: 130 * mib, Top: []wire.HolderGroup{{Name: "model", Kind: "parameters", Bytes: 130 * mib, Tensors: 4}}}},
	}
	rows := Rows(snaps, devs)
	if *rows[2].DAllocated != 30*mib || *rows[3].DAllocated != 30*mib {
		t.Fatalf("Epoch 1 deltas %d, %d: each against its own process's start", *rows[2].DAllocated, *rows[3].DAllocated)
	}
	if rows[1].DAllocated != nil {
		t.Fatal("pid 20's first row diffed against pid 10's")
	}
	if v := rows[4].Verdict; v == nil || v.Status != Released {
		t.Fatalf("pid 10: %+v", v)
	}
	if v := rows[5].Verdict; v == nil || v.Status != Leaked || !strings.Contains(v.Text, "model (4 tensors)") ||
		!strings.Contains(v.Baseline, `vs "Training start": +30.00 MiB`) {
		t.Fatalf("pid 20: %+v", v)
	}
	for i := 0; i < 4; i++ {
		if rows[i].Verdict != nil {
			t.Fatalf("row %d is no end row but has a verdict", i)
		}
	}
}

func held(alloc, py, internal, unacc uint64, top ...wire.HolderGroup) *wire.Held {
	return &wire.Held{Allocated: alloc, Python: py, Internal: internal, Unaccounted: unacc, Top: top}
}

// Each case the verdict must get right, from what an end row carries.
func TestJudge(t *testing.T) {
	base := wire.Row{Label: "Training start", Dev: 0, PID: 7, Allocated: u(400 * mib)}
	end := func(alloc uint64, h *wire.Held) wire.Row {
		return wire.Row{Label: "After cleanup", Dev: 0, PID: 7, Allocated: u(alloc), End: true, Held: h}
	}
	kept := wire.HolderGroup{Kind: "variable", Name: "kept", Bytes: 100 * mib, Tensors: 1,
		Examples: []string{"float32[26214400]"}, Hint: "del kept; gputop.cleanup()"}
	cases := []struct {
		name   string
		row    wire.Row
		status Status
		want   []string
	}{
		{"workspaces only: released, and named", end(65*mib, held(65*mib, 0, 65*mib, 0)), Released,
			[]string{"After cleanup: nothing of yours holds CUDA memory (65.0 MiB cuBLAS workspaces, not a leak: gputop.cleanup() frees them)"}},
		// the baseline (400 MiB, taken with the model on the GPU) is above
		// what is left: the old verdict said "back at the baseline"
		{"model deleted, other tensors kept: held, named", end(100*mib, held(100*mib, 100*mib, 0, 0, kept)), Leaked,
			[]string{"After cleanup: 100.0 MiB still held: kept (1 tensor float32[26214400]): del kept; gputop.cleanup()"}},
		{"kept and workspaces", end(165*mib, held(165*mib, 100*mib, 65*mib, 0, kept)), Leaked,
			[]string{"100.0 MiB still held: kept", "and 65.0 MiB cuBLAS workspaces"}},
		{"nothing allocated", end(0, held(0, 0, 0, 0)), Released, []string{"nothing of yours holds CUDA memory (0 B allocated)"}},
		{"unaccounted: cannot tell", end(12*mib, held(12*mib, 0, 0, 12*mib)), Unknown,
			[]string{"12.0 MiB allocated that gputop cannot account for"}},
		{"walk cut short", end(12*mib, &wire.Held{Skipped: "the holders walk took longer than 2 s and was stopped"}), Unknown,
			[]string{"could not tell what holds 12.0 MiB: the holders walk took longer than 2 s"}},
		{"no walk", end(12*mib, nil), Unknown, []string{"no holders walk came with this row"}},
		{"no walk, nothing allocated", end(0, nil), Released, []string{"0 B allocated"}},
		{"waiting", func() wire.Row { r := end(12*mib, nil); r.Awaiting = true; return r }(), Pending,
			[]string{"waiting for its agent's holders walk"}},
		{"memory moved before the walk", end(10*mib, held(0, 0, 0, 0)), Released,
			[]string{"at the walk 0 B was allocated, 10.0 MiB at the row"}},
		{"no agent: NVML lists a process", wire.Row{Label: "cleanup", End: true, NVMLUsed: u(600 * mib),
			Procs: &[]wire.Proc{{PID: 99, Name: "python3", Used: 600 * mib}}}, Unknown,
			[]string{"cleanup: pid 99 (python3) 600.0 MiB still uses this GPU (NVML"}},
		{"no agent: NVML lists none", wire.Row{Label: "cleanup", End: true, Procs: &[]wire.Proc{}}, Released,
			[]string{"no process uses memory on this GPU (NVML)"}},
		{"no agent, no process list", wire.Row{Label: "cleanup", End: true}, Unknown,
			[]string{"gputop cannot tell"}},
	}
	for _, c := range cases {
		v := Judge(c.row, base, c.row.PID == base.PID)
		if v.Status != c.status {
			t.Errorf("%s: status %v, want %v (%s)", c.name, v.Status, c.status, v.Text)
		}
		for _, w := range c.want {
			if !strings.Contains(v.Text, w) {
				t.Errorf("%s: %q lacks %q", c.name, v.Text, w)
			}
		}
	}
	// the baseline is a second figure, never the verdict
	v := Judge(end(100*mib, held(100*mib, 100*mib, 0, 0, kept)), base, true)
	if v.Baseline != `vs "Training start": -300.00 MiB allocated (torch)` || v.Basis != "holders walk" || v.Top != "kept" {
		t.Fatalf("%+v", v)
	}
}

func TestWriteCSV(t *testing.T) {
	snaps, devs := sample()
	path := filepath.Join(t.TempDir(), "out.csv")
	if err := WriteCSV(path, snaps, devs); err != nil {
		t.Fatal(err)
	}
	recs, col := readCSV(t, path)
	if got := strings.Join(recs[0][:7], ","); got != "label,time,device,allocated_mb,reserved_mb,peak_mb,nvml_used_mb" {
		t.Fatal(got)
	}
	r := recs[3] // Epoch 5
	if r[0] != "Epoch 5" || r[col["allocated_mb"]] != "13.00" || r[col["allocated_bytes"]] != "13631488" ||
		r[col["peak_mb"]] != "15.00" || r[col["nvml_peak_mb"]] != "530.00" || r[col["delta_allocated_mb"]] != "+12.00" ||
		r[col["pid"]] != "42" || r[col["source"]] != "agent" {
		t.Fatalf("%v", r)
	}
	// a row without an agent leaves allocator cells empty, never 0
	r = recs[4]
	if r[col["allocated_mb"]] != "" || r[col["allocated_bytes"]] != "" || r[col["nvml_used_mb"]] != "510.00" {
		t.Fatalf("%v", r)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary file left behind: %v", ents)
	}
}

func TestWriteCSVUnwritable(t *testing.T) {
	snaps, devs := sample()
	dir := t.TempDir()
	good := filepath.Join(dir, "keep.csv")
	if err := WriteCSV(good, snaps, devs); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(good)
	bad := filepath.Join(dir, "no", "such", "dir", "out.csv")
	err := WriteCSV(bad, snaps, devs)
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), ".tmp") {
		t.Fatalf("error must name the path asked for: %v", err)
	}
	// a directory in place of the file: rename fails, nothing half-written
	if err := WriteCSV(dir, snaps, devs); err == nil {
		t.Fatal("writing over a directory must fail")
	}
	after, _ := os.ReadFile(good)
	if string(before) != string(after) {
		t.Fatal("earlier export changed")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func TestCSVOOMColumns(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200"})
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentMark(9, wire.Mark{T: 100, Label: "Epoch 1", Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Reserved: 2, Peak: 1}}})
	st.AgentOOM(9, wire.OOM{T: 200, Dev: 0, Requested: 80 << 30, Free: 5 << 20, Limit: 70 << 30, Allocated: 3, Reserved: 4, Peak: 3})
	path := filepath.Join(t.TempDir(), "oom.csv")
	if err := WriteCSV(path, st.Rows(), st.Devices()); err != nil {
		t.Fatal(err)
	}
	recs, col := readCSV(t, path)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[1]; r[0] != "Epoch 1" || r[col["oom_requested_bytes"]] != "" || r[col["oom_free_bytes"]] != "" || r[col["oom_limit_bytes"]] != "" {
		t.Fatalf("an OOM row has no OOM figures: %v", r)
	}
	if r := recs[2]; r[0] != "OOM" || r[col["oom_requested_bytes"]] != "85899345920" || r[col["oom_free_bytes"]] != "5242880" ||
		r[col["oom_limit_bytes"]] != "75161927680" ||
		r[col["allocated_bytes"]] != "3" {
		t.Fatalf("OOM row %v", r)
	}
}

// Under torch.cuda.set_per_process_memory_fraction an OOM comes with free
// memory on the GPU: the explanation names the fraction, not the cache or
// live tensors; without one (limit = the total) the usual causes stand.
func TestExplainOOMLimit(t *testing.T) {
	const total = 140 << 30
	used := uint64(10 << 30)
	row := Row{Row: wire.Row{NVMLUsed: &used}}
	o := wire.OOM{Requested: 4 << 30, Free: 120 << 30, Limit: 14 << 30, Allocated: 11 << 30, Reserved: 12 << 30}
	e := ExplainOOM(row, o, total)
	if !strings.HasPrefix(e.Cause, "torch may use only 14.00 GiB of this GPU's 140.0 GiB (torch.cuda.set_per_process_memory_fraction)") {
		t.Fatalf("cause %q", e.Cause)
	}
	o.Limit = total
	if e := ExplainOOM(row, o, total); !strings.HasPrefix(e.Cause, "Live tensors") {
		t.Fatalf("limit = total: cause %q", e.Cause)
	}
	o.Limit, o.Requested = 14<<30, 1<<30 // within the cache's room: fragmentation, not the fraction
	if e := ExplainOOM(row, o, total); !strings.Contains(e.Cause, "fragmentation") {
		t.Fatalf("request within the limit: cause %q", e.Cause)
	}
}

// The H200's figures from a real fill-the-GPU OOM: torch's total (and so
// the observer's limit with no fraction set) is below NVML's total, which
// is no memory fraction; the store takes torch's total from the hello.
func TestExplainOOMTorchTotalBelowNVMLTotal(t *testing.T) {
	const nvmlTotal, torchTotal = 150754820096, 150110011392
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", Total: nvmlTotal})
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0", Total: torchTotal}}})
	st.AgentOOM(9, wire.OOM{T: 200, Dev: 0, Requested: 1 << 30, Free: 210845696, Limit: torchTotal,
		Allocated: 149250113536, Reserved: 149250113536, Peak: 149250113536})
	row, o, ok := LatestOOM(Rows(st.Rows(), st.Devices()), 0)
	if !ok || o.DeviceTotal != torchTotal {
		t.Fatalf("oom frame %+v (found %v): torch's total from the hello wanted", o, ok)
	}
	if e := ExplainOOM(row, o, nvmlTotal); !strings.HasPrefix(e.Cause, "Live tensors") {
		t.Fatalf("cause %q", e.Cause)
	}
	o.Limit = torchTotal / 20 // set_per_process_memory_fraction(0.05)
	o.Requested = 8 << 30
	if e := ExplainOOM(row, o, nvmlTotal); !strings.HasPrefix(e.Cause, "torch may use only 6.99 GiB of this GPU's 139.8 GiB") {
		t.Fatalf("cause %q", e.Cause)
	}
}

func TestFindings(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", Total: 140 << 30})
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-1", Name: "NVIDIA H200", Total: 140 << 30})
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	mark := func(t int64, label string, alloc uint64) {
		st.AgentMark(9, wire.Mark{T: t, Label: label, Devs: []wire.DevStats{{Dev: 0, Allocated: alloc, Reserved: 2 * alloc, Peak: alloc}}})
	}
	mark(100, "Training start", 1<<30)
	st.AgentOOM(9, wire.OOM{T: 200, Dev: 0, Requested: 512 << 20, Free: 1 << 20, Allocated: 2 << 30, Reserved: 3 << 30})
	mark(300, "After cleanup", 1<<30+5*mib)
	mark(400, "Training end", 0)
	// a row after the end rows: each end row keeps its verdict
	mark(500, "Epoch 1", 5*mib)
	got := Findings(st.Rows(), st.Devices())
	want := []string{
		"GPU 0 (NVIDIA H200), pid 9: ? After cleanup: 1.00 GiB allocated (torch), and no holders walk came with this row: gputop cannot tell what holds it [torch's counters]",
		`  vs "Training start": +5.00 MiB allocated (torch)`,
		"GPU 0 (NVIDIA H200), pid 9: ✓ Training end: nothing of yours holds CUDA memory (0 B allocated) [torch's counters]",
		`  vs "Training start": -1024.00 MiB allocated (torch)`,
		"GPU 0 (NVIDIA H200): ✗ OOM at " + TimeString(200) + " in pid 9: asked for 512.0 MiB, 1.0 MiB free on the GPU (CUDA).",
		"  The cache had room but no free block that large: fragmentation. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it. " +
			"torch held 2.00 GiB in tensors (allocated) and 1.00 GiB cached but unused (reserved − allocated).",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// GPU 1 has no rows: nothing to say about it
	for _, l := range got {
		if strings.HasPrefix(l, "GPU 1") {
			t.Fatalf("a finding on GPU 1, which has no rows: %q", l)
		}
	}
}

// readCSV reads a written summary: its records and the index of each header name.
func readCSV(t *testing.T, path string) ([][]string, map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	return recs, col
}

func TestTableMarksMissingValuesAndVerdicts(t *testing.T) {
	al, re, pk, used := uint64(3<<20), uint64(4<<20), uint64(5<<20), uint64(10<<20)
	rows := []wire.Row{
		{Label: "Process start", Dev: 0, PID: 7, Allocated: new(uint64), Reserved: new(uint64), Peak: new(uint64)},
		{Label: "Process end", Dev: 0, PID: 7, Allocated: &al, Reserved: &re, Peak: &pk, End: true,
			Held: &wire.Held{Allocated: al, Python: al}},
		{Label: "key", Dev: 0, NVMLUsed: &used},
	}
	got := Table(rows, []store.Device{{Name: "H200"}})
	want := []string{
		"label          GPU  pid  allocated MiB  reserved MiB  peak MiB  NVML used MiB     ",
		"Process start  0    7    0.00           0.00          0.00      —                 ",
		"Process end    0    7    3.00           4.00          5.00      —              ✗  ",
		"key            0    —    —              —             —         10.00             ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The rank and job columns come last, from each row's process: an agent
// of rank 3 in job "=run" (kept from being read as a formula), one of no
// job, and a key row of no process.
func TestCSVRankAndJobColumns(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200"})
	st.AgentHello(wire.Hello{PID: 9, Rank: "3", WorldSize: "8", Job: "=run", Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentHello(wire.Hello{PID: 10, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentMark(9, wire.Mark{T: 100, Label: "Epoch 1", Devs: []wire.DevStats{{Dev: 0, Allocated: 1}}})
	st.AgentMark(10, wire.Mark{T: 110, Label: "Epoch 1", Devs: []wire.DevStats{{Dev: 0, Allocated: 1}}})
	st.AddNVML(0, 120, 5, 0)
	st.TakeSnapshot("key", 0, 130, "key", nil, false)
	path := filepath.Join(t.TempDir(), "rank.csv")
	if err := WriteStoreCSV(path, st); err != nil {
		t.Fatal(err)
	}
	recs, col := readCSV(t, path)
	// rank and job come after host, before dump (the row's memory dump)
	if h := recs[0]; !strings.Contains(strings.Join(h, ","), ",host,rank,job,dump,") || strings.Join(h[:7], ",") != "label,time,device,allocated_mb,reserved_mb,peak_mb,nvml_used_mb" {
		t.Fatalf("header %v", h)
	}
	got := map[string][2]string{}
	for _, r := range recs[1:] {
		got[r[col["pid"]]+" "+r[col["label"]]] = [2]string{r[col["rank"]], r[col["job"]]}
	}
	want := map[string][2]string{"9 Epoch 1": {"3", "'=run"}, "10 Epoch 1": {"", ""}, " key": {"", ""}}
	if len(got) != len(want) {
		t.Fatalf("rows %v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("row %q: rank, job = %q, want %q", k, got[k], w)
		}
	}
}
