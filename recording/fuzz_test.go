package recording

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzLoad from fuzzSeeds")

// fuzzSeeds are small recordings, valid and broken, built from wire values
// so they do not depend on the writer's timing.
func fuzzSeeds() map[string][]byte {
	nvml := func(dev int, t0 int64, used ...uint64) []byte {
		b := &batch{}
		b.reset(dev, t0, used[0], 1<<29)
		for i, u := range used[1:] {
			b.add(t0+int64(i+1)*ms, u, 1<<29)
		}
		return append(batchLine(b), '\n')
	}
	var valid bytes.Buffer
	writeLines(&valid, header(),
		wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", Total: 150_000_000_000},
		wire.Device{Type: wire.TypeDevice, Index: 1, UUID: "GPU-b", Name: "agent only"},
		wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: base, Argv: []string{"python"}, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b", Name: "agent only"}}})
	valid.Write(nvml(0, base, 1<<30, 1<<30, 5<<30, 1<<30))
	writeLines(&valid,
		wire.Procs{Type: wire.TypeProcs, T: base + ms, Dev: 0, Procs: []wire.Proc{{PID: 7, Name: "python", Used: 1 << 30}}},
		wire.Sample{Type: wire.TypeSample, PID: 7, T: base + 2*ms, Dev: 0, Allocated: 1 << 20, Reserved: 2 << 20, Peak: 3 << 20},
	)
	sb := newSampleBatch(7, wire.Sample{T: base + 2*ms, Dev: 0, Allocated: 1 << 20, Reserved: 2 << 20, Peak: 3 << 20})
	sb.add(wire.Sample{T: base + 2*ms + ms/2, Dev: 0, Allocated: 5 << 20, Reserved: 2 << 20, Peak: 5 << 20, Inactive: 7})
	f := sb.frame()
	valid.Write(append(f.AppendJSON(nil), '\n'))
	writeLines(&valid,
		wire.Row{Type: wire.TypeRow, T: base + 3*ms, Label: "Epoch 5", Dev: 0, PID: 7, Source: "agent", Allocated: u64(1 << 20), Reserved: u64(2 << 20), Peak: u64(3 << 20), NVMLUsed: u64(1 << 30), NVMLPeak: u64(5 << 30)},
		wire.OOM{Type: wire.TypeOOM, PID: 7, T: base + 3*ms, Dev: 0, Requested: 1 << 34, Allocated: 1, Reserved: 2, Peak: 3},
		wire.Holders{Type: wire.TypeHolders, PID: 7, T: base + 4*ms, Dev: 0, Total: 10, Groups: []wire.HolderGroup{{Kind: "container", Name: "losses", Bytes: 10, Tensors: 1}}},
		wire.DevError{Type: wire.TypeDevError, T: base + 4*ms, Dev: 0, Error: "GPU is lost"},
		wire.Ended{Type: wire.TypeEnded, PID: 7, T: base + 5*ms, Reason: "killed"},
		wire.Bye{Type: wire.TypeBye, PID: 7, T: base + 5*ms},
	)
	valid.Write(nvml(0, base+4*ms, 1<<30, 0, 1<<30))
	v := valid.Bytes()
	ls := lines(v)

	seeds := map[string][]byte{
		"valid":     v,
		"truncated": v[:len(v)-17],
		"garbage":   append(append(bytes.Join(ls[:5], nil), "not json\n"...), bytes.Join(ls[5:], nil)...),
		"version3":  bytes.Replace(v, []byte(`"v":2`), []byte(`"v":3`), 1),
		"unknown":   append(append(bytes.Join(ls[:3], nil), "\r\n{\"type\":\"future\",\"x\":[1]}\n\n"...), bytes.Join(ls[3:], nil)...),
		"mismatch":  append(bytes.Join(ls[:2], nil), `{"type":"nvml","dev":0,"t0":1760000000000000000,"dt":[0,1],"used":[1]}`+"\n"...),
		"twoheads":  append(append([]byte(nil), v...), v...),
		"empty":     nil,
	}
	return seeds
}

func corpusFile(data []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// The seed corpus is checked in; -update-seeds rewrites it.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzLoad")
	for name, data := range fuzzSeeds() {
		path := filepath.Join(dir, name)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corpusFile(data), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, corpusFile(data)) {
			t.Errorf("%s is missing or stale (go test ./recording -run TestFuzzSeeds -update-seeds): %v", path, err)
		}
	}
	// the valid seed is valid, and loads its agent-only device as such
	st := store.New(liveOptions())
	info, err := LoadReader("valid", bytes.NewReader(fuzzSeeds()["valid"]), st)
	if err != nil || info.Samples != 7 || len(st.Rows()) != 2 {
		t.Fatalf("valid seed: %v, %+v, %d rows", err, info, len(st.Rows()))
	}
	if d := st.Devices(); len(d) != 2 || d[0].Source != "nvml" || d[1].Source != "agent" {
		t.Fatalf("devices %+v", d)
	}
}

// FuzzLoad: any input loads without panicking; an error is a FormatError
// (the reader never fails) that points at the start of a line, and
// everything before that line was accepted.
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := store.DefaultOptions()
		opt.RawCapacity = 1000
		st := store.New(opt)
		info, err := LoadReader("fuzz", bytes.NewReader(data), st)
		if info.Bytes < 0 || info.Bytes > int64(len(data)) {
			t.Fatalf("Info.Bytes %d of %d", info.Bytes, len(data))
		}
		if err == nil {
			if info.Bytes != int64(len(data)) {
				t.Fatalf("no error but only %d of %d bytes read", info.Bytes, len(data))
			}
			return
		}
		fe := asFormatError(t, err)
		if fe.Offset != info.Bytes || (fe.Offset > 0 && data[fe.Offset-1] != '\n') {
			t.Fatalf("error at byte %d, %d bytes read: not a line start", fe.Offset, info.Bytes)
		}
		if want := 1 + bytes.Count(data[:fe.Offset], []byte("\n")); fe.Line != want {
			t.Fatalf("line %d, want %d", fe.Line, want)
		}
		if fe.Truncated && bytes.IndexByte(data[fe.Offset:], '\n') >= 0 {
			t.Fatal("truncated, but the line has a newline")
		}
		if fe.Offset > 0 {
			// the part before the bad line loads on its own, the same way
			info2, err2 := LoadReader("prefix", bytes.NewReader(data[:fe.Offset]), store.New(opt))
			if err2 != nil || info2.Frames != info.Frames || info2.Samples != info.Samples {
				t.Fatalf("prefix: %v, %+v vs %+v", err2, info2, info)
			}
		}
	})
}

// FuzzParseBatch: the batch fast path accepts only lines that encoding/json
// reads to the same values.
func FuzzParseBatch(f *testing.F) {
	b := &batch{}
	b.reset(1, base, 1<<30, 7)
	b.add(base+ms, 1<<30+5, 7)
	b.add(base+ms-3, 0, 1<<63)
	f.Add(batchLine(b))
	f.Add([]byte(`{"type":"nvml","dev":0,"t0":-9223372036854775808,"dt":[9223372036854775807],"used":[-0]}`))
	f.Add([]byte(`{"type":"nvml","dev":0,"t0":01,"dt":[],"used":[]}`))
	f.Add([]byte(`{"type":"nvml","dev":0,"t0":1,"dt":[1],"used":[2],"reserved":[3]} `))
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast wire.NVML
		if !parseBatch(line, &fast) {
			return
		}
		var slow wire.NVML
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses: %v", err)
		}
		norm := func(xs []int64) []int64 {
			if len(xs) == 0 {
				return nil
			}
			return xs
		}
		fast.DT, fast.Used, fast.Reserved = norm(fast.DT), norm(fast.Used), norm(fast.Reserved)
		slow.DT, slow.Used, slow.Reserved = norm(slow.DT), norm(slow.Used), norm(slow.Reserved)
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v\nslow %+v", fast, slow)
		}
	})
}
