package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// small writes a short recording through a real Writer: batches of a few
// samples (40 ms apart, so a batch holds three), agent frames and rows.
func small(t testing.TB) []byte {
	path := tempPath(t, "small.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	st := tap(store.New(liveOptions()), w)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", Total: 1 << 37, Source: "nvml"})
	for i := int64(0); i < 12; i++ {
		st.AddNVML(0, base+i*40*ms, uint64(1<<30+i*(1<<20)), 1<<29)
		switch i {
		case 2:
			st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: base + i*40*ms, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
		case 4:
			st.AgentSample(7, wire.Sample{Type: wire.TypeSample, T: base + i*40*ms, Allocated: 1 << 20, Reserved: 2 << 20, Peak: 3 << 20})
		case 6:
			st.TakeSnapshot("Epoch 5", 0, base+i*40*ms, "key", nil)
		case 8:
			st.AgentOOM(7, wire.OOM{Type: wire.TypeOOM, T: base + i*40*ms, Allocated: 1, Reserved: 2, Peak: 3})
		case 10:
			st.AgentEnded(7, base+i*40*ms, false, "killed")
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, path)
}

// expect is what loading the complete lines ls should give.
type expect struct {
	frames, samples, rows int
}

func expectOf(t testing.TB, ls [][]byte) expect {
	var e expect
	for _, l := range ls[1:] {
		var h wire.Head
		if err := json.Unmarshal(l, &h); err != nil {
			t.Fatal(err)
		}
		e.frames++
		switch h.Type {
		case wire.TypeNVML:
			var f wire.NVML
			json.Unmarshal(l, &f)
			e.samples += len(f.DT)
		case wire.TypeRow, wire.TypeOOM:
			e.rows++
		}
	}
	return e
}

func checkLoaded(t *testing.T, what string, info Info, st *store.Store, e expect) {
	t.Helper()
	if info.Frames != e.frames || info.Samples != int64(e.samples) {
		t.Fatalf("%s: loaded %d frames, %d samples; want %d, %d", what, info.Frames, info.Samples, e.frames, e.samples)
	}
	if n := st.Count(store.Key{Dev: 0, Metric: store.NVMLUsed}); n != uint64(e.samples) {
		t.Fatalf("%s: store has %d samples, want %d", what, n, e.samples)
	}
	if n := len(st.Rows()); n != e.rows {
		t.Fatalf("%s: store has %d rows, want %d", what, n, e.rows)
	}
}

// Cutting a recording at every byte never panics, reports a cut-off last
// line at the right place, and keeps every whole line before it.
func TestTruncatedAtEveryByte(t *testing.T) {
	data := small(t)
	ls := lines(data)
	if len(ls) < 8 {
		t.Fatalf("small recording has only %d lines", len(ls))
	}
	for cut := 0; cut <= len(data); cut++ {
		st := store.New(liveOptions())
		info, err := LoadReader("cut", bytes.NewReader(data[:cut]), st)
		// whole lines before the cut, and where the partial one starts
		var whole, start int
		for whole < len(ls) && start+len(ls[whole]) <= cut {
			start += len(ls[whole])
			whole++
		}
		partial := cut - start
		what := fmt.Sprintf("cut at %d", cut)
		switch {
		case cut == 0:
			fe := asFormatError(t, err)
			if fe.Offset != 0 || fe.Line != 1 || !strings.Contains(fe.Msg, "empty") {
				t.Fatalf("%s: %v", what, err)
			}
		case partial == 0 || partial == len(ls[whole])-1:
			// at a line boundary, or only the final newline missing
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			n := whole
			if partial > 0 {
				n++
			}
			checkLoaded(t, what, info, st, expectOf(t, ls[:n]))
			if info.Bytes != int64(cut) {
				t.Fatalf("%s: Info.Bytes %d", what, info.Bytes)
			}
		default:
			fe := asFormatError(t, err)
			if !fe.Truncated || fe.Offset != int64(start) || fe.Line != whole+1 || fe.File != "cut" {
				t.Fatalf("%s: got %+v, want truncated at byte %d line %d", what, fe, start, whole+1)
			}
			if info.Bytes != int64(start) {
				t.Fatalf("%s: Info.Bytes %d, want %d", what, info.Bytes, start)
			}
			if whole > 0 {
				checkLoaded(t, what, info, st, expectOf(t, ls[:whole]))
			}
		}
	}
}

func TestGarbageInTheMiddle(t *testing.T) {
	data := small(t)
	ls := lines(data)
	for _, bad := range []struct{ line, msg string }{
		{"this is not json\n", "invalid JSON at column 2"},
		{`{"type":"sample","t":1760000000000000000,"dev":0,"allocated":1,"reserved":2,"peak":3}` + "\n", `required field "pid"`},
		{`{"type":"nvml","dev":0,"t0":1760000000000000000,"dt":[0,1],"used":[5]}` + "\n", "dt has 2 samples but used has 1"},
		{`{"type":"nvml","dev":0,"t0":1760000000000000000,"dt":[],"used":[]}` + "\n", "empty batch"},
		{`{"type":"nvml","dev":0,"t0":1760000000000000000,"dt":[0,9223372036854775807],"used":[1,2]}` + "\n", "dt[1]"},
		{`{"type":"device","index":100000,"uuid":"x","name":"y","total":1}` + "\n", "device index 100000 out of range"},
		{`{"type":"samples","pid":7,"dev":0,"t0":1760000000000000000,"dt":[0,1],"allocated":[1],"reserved":[1,2],"peak":[1,2]}` + "\n", "dt has 2 samples but allocated has 1"},
		{`{"type":"samples","pid":7,"dev":0,"t0":1760000000000000000,"dt":[0,1],"allocated":[1,2],"reserved":[1,2],"peak":[1,2],"inactive":[3]}` + "\n", "dt has 2 samples but inactive has 1"},
		{`{"type":"samples","pid":0,"dev":0,"t0":1760000000000000000,"dt":[0],"allocated":[1],"reserved":[1],"peak":[1]}` + "\n", "pid 0 is not a process id"},
		{`{"type":"samples","pid":7,"dev":0,"t0":1760000000000000000,"dt":[],"allocated":[],"reserved":[],"peak":[]}` + "\n", "empty batch"},
		{`{"type":"samples","pid":7,"dev":0,"t0":1760000000000000000,"dt":[0],"allocated":[1],"reserved":[1]}` + "\n", `required field "peak"`},
		{`{"type":"samples","pid":7,"dev":0,"t0":5,"dt":[0],"allocated":[1],"reserved":[1],"peak":[1]}` + "\n", "time 5 is not within"},
		{`{"type":"procs","t":5,"dev":0,"procs":[]}` + "\n", "time 5 is not within"},
		{`{"type":"snapshot","t":1760000000000000000,"label":"x","dev":"zero","source":"key"}` + "\n", `field "dev": want int, got JSON string`},
		{`{"type":"bye","pid":0,"t":1760000000000000000}` + "\n", "pid 0 is not a process id"},
		{`{"type":"device_error","t":1760000000000000000,"dev":0,"error":null}` + "\n", `field "error" is null`},
		{`{"type":"hello","v":1,"pid":3,"t":1760000000000000000,"devices":[]} trailing` + "\n", "invalid JSON"},
		{`[1,2,3]` + "\n", "want a JSON object"},
		{`{"dev":0}` + "\n", `no "type" field`},
	} {
		k := 5
		var in []byte
		for _, l := range ls[:k] {
			in = append(in, l...)
		}
		off := len(in)
		in = append(in, bad.line...)
		for _, l := range ls[k:] {
			in = append(in, l...)
		}
		st := store.New(liveOptions())
		info, err := LoadReader("mid.gputop", bytes.NewReader(in), st)
		fe := asFormatError(t, err)
		if fe.Truncated || fe.Offset != int64(off) || fe.Line != k+1 || !strings.Contains(fe.Msg, bad.msg) {
			t.Errorf("%q: got %+v, want line %d byte %d containing %q", bad.line, fe, k+1, off, bad.msg)
			continue
		}
		want := fmt.Sprintf("mid.gputop: byte %d (line %d): ", off, k+1)
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q does not start with %q", err, want)
		}
		checkLoaded(t, bad.line, info, st, expectOf(t, ls[:k]))
	}
}

// A whole frame without its final newline that is wrong for another reason
// is an ordinary error, not a cut-off line.
func TestBadLastLineIsNotTruncated(t *testing.T) {
	data := small(t)
	in := append(append([]byte(nil), data...), `{"type":"bye","t":1760000000000000000}`...)
	_, err := LoadReader("x", bytes.NewReader(in), store.New(liveOptions()))
	if fe := asFormatError(t, err); fe.Truncated || fe.Offset != int64(len(data)) || !strings.Contains(fe.Msg, `"pid"`) {
		t.Fatalf("got %+v", fe)
	}
}

// Frames from a newer writer are skipped and counted; blank lines and CRLF
// line ends are harmless; a second header (files joined with cat) is fine.
func TestSkipUnknown(t *testing.T) {
	data := small(t)
	ls := lines(data)
	var in []byte
	for i, l := range ls {
		in = append(in, l...)
		if i == 3 {
			in = append(in, `{"type":"gpu_clock","dev":0,"t":1,"mhz":1980}`+"\n"...)
			in = append(in, `{"type":"mark","t":1,"label":"x","devs":[]}`+"\n"...)
			in = append(in, "\n   \r\n"...)
			in = append(in, bytes.Replace(ls[0], []byte("\n"), []byte("\r\n"), 1)...)
		}
	}
	st := store.New(liveOptions())
	info, err := LoadReader("new", bytes.NewReader(in), st)
	if err != nil {
		t.Fatal(err)
	}
	if info.Skipped != 2 {
		t.Errorf("Skipped = %d, want 2", info.Skipped)
	}
	checkLoaded(t, "skip", info, st, expectOf(t, ls))
}

func TestWrongVersion(t *testing.T) {
	data := small(t)
	cur, next := fmt.Sprintf(`"v":%d`, FormatVersion), fmt.Sprintf(`"v":%d`, FormatVersion+1)
	in := bytes.Replace(data, []byte(cur), []byte(next), 1)
	st := store.New(liveOptions())
	info, err := LoadReader("next.gputop", bytes.NewReader(in), st)
	fe := asFormatError(t, err)
	if fe.Offset != 0 || fe.Line != 1 || fe.Truncated || !strings.Contains(fe.Msg, fmt.Sprintf("version %d is not supported", FormatVersion+1)) {
		t.Fatalf("got %v", err)
	}
	if info.Frames != 0 || len(st.Devices()) != 0 || st.Start() != 0 {
		t.Fatal("a refused recording put data in the store")
	}
}

func TestNotARecording(t *testing.T) {
	for in, msg := range map[string]string{
		"label,time,device\n":                   "not a gputop recording: invalid JSON",
		`{"type":"sample"}` + "\n":              `not a gputop recording: the first line is a "sample" frame`,
		`{"v":1}` + "\n":                        `not a gputop recording: the first line has no "type"`,
		`{"type":"recording","start":1}` + "\n": `without the required field "v"`,
		"\n":                                    "first line is empty",
	} {
		_, err := LoadReader("x.csv", strings.NewReader(in), store.New(liveOptions()))
		fe := asFormatError(t, err)
		if fe.Line != 1 || fe.Offset != 0 || !strings.Contains(fe.Msg, msg) {
			t.Errorf("%q: got %v, want %q", in, err, msg)
		}
	}
}

func TestOversizedLine(t *testing.T) {
	data := small(t)
	ls := lines(data)
	head := append([]byte(nil), ls[0]...)
	head = append(head, ls[1]...)
	// a valid frame padded to exactly the limit loads
	frame := `{"type":"bye","pid":1,"t":1760000000000000000}`
	ok := frame + strings.Repeat(" ", MaxLineBytes-len(frame)) + "\n"
	tooLong := "{" + strings.Repeat("x", MaxLineBytes) + "}\n"
	in := append(append(append(append([]byte(nil), head...), ok...), tooLong...), ls[2]...)

	st := store.New(liveOptions())
	info, err := LoadReader("big", bytes.NewReader(in), st)
	fe := asFormatError(t, err)
	off := int64(len(head) + len(ok))
	if fe.Offset != off || fe.Line != 4 || fe.Truncated || !strings.Contains(fe.Msg, "longer than 4194304 bytes") {
		t.Fatalf("got %+v, want line 4 at byte %d", fe, off)
	}
	if info.Frames != 2 || info.Bytes != off {
		t.Fatalf("loaded %d frames, %d bytes; want 2 frames, %d bytes", info.Frames, info.Bytes, off)
	}
	// the same at the very end of the input, without a newline
	in = append(append([]byte(nil), head...), tooLong[:len(tooLong)-1]...)
	_, err = LoadReader("big", bytes.NewReader(in), store.New(liveOptions()))
	if fe := asFormatError(t, err); fe.Offset != int64(len(head)) || !strings.Contains(fe.Msg, "longer than") {
		t.Fatalf("got %v", err)
	}
}

// An I/O error while reading is returned as it is, not as a format error,
// and what came before it is kept.
func TestReadError(t *testing.T) {
	data := small(t)
	ls := lines(data)
	r := io.MultiReader(bytes.NewReader(bytes.Join(ls[:4], nil)), errReader{})
	st := store.New(liveOptions())
	info, err := LoadReader("pipe", r, st)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || strings.Contains(fmt.Sprint(err), "cut off") {
		t.Fatalf("got %v", err)
	}
	checkLoaded(t, "read error", info, st, expectOf(t, ls[:4]))
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("disk on fire") }

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(tempPath(t, "nope.gputop"), store.New(liveOptions()))
	if !os.IsNotExist(unwrapAll(err)) || !strings.Contains(err.Error(), "nope.gputop") {
		t.Fatalf("got %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
