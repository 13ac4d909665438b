package recording

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// The decoder hands on each frame as soon as its line is whole: over a
// real pipe whose writer waits for the reader's answer before it writes the
// next line, every frame of a real recording comes out before the next
// line exists (a decoder that read ahead would wait forever).
func TestDecoderStreamsFromAPipe(t *testing.T) {
	data := small(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := make(chan struct{})
	go func() {
		defer w.Close()
		for _, l := range lines(data) {
			if _, err := w.Write(l); err != nil {
				return
			}
			if _, ok := <-next; !ok {
				return
			}
		}
	}()
	defer close(next)
	d := NewDecoder("pipe", r)
	var types []string
	for range lines(data) {
		f, err := d.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", len(types), err)
		}
		types = append(types, f.FrameType())
		next <- struct{}{}
	}
	if _, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
	if types[0] != wire.TypeRecording || d.Header().Host != "testhost" {
		t.Fatalf("first frame %q, header %+v", types[0], d.Header())
	}
	if d.Offset() != int64(len(data)) {
		t.Fatalf("offset %d, want %d", d.Offset(), len(data))
	}
	t.Logf("%d frames: %v", len(types), types)
}

// A stream cut off mid-line (the remote killed) gives every whole frame,
// then a truncation naming the offset of the cut line.
func TestDecoderTruncatedStream(t *testing.T) {
	ls := lines(small(t))
	whole := strings.Join([]string{string(ls[0]), string(ls[1])}, "")
	cut := ls[2][:len(ls[2])/2]
	d := NewDecoder("node1's stream", strings.NewReader(whole+string(cut)))
	for i := 0; i < 2; i++ {
		if _, err := d.Next(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	_, err := d.Next()
	fe := asFormatError(t, err)
	if !fe.Truncated || fe.Offset != int64(len(whole)) || fe.Line != 3 {
		t.Fatalf("got %+v, want truncated at byte %d, line 3", fe, len(whole))
	}
	if !strings.HasPrefix(err.Error(), "node1's stream: byte ") {
		t.Fatalf("error does not name the stream: %v", err)
	}
}

// Garbage after good frames stops the stream at the garbage's offset, not
// as a truncation; the frames after it are never handed on, and every later
// call gives the same error.
func TestDecoderGarbage(t *testing.T) {
	ls := lines(small(t))
	good := string(ls[0]) + string(ls[1])
	in := good + "\x1b[2Jnot a frame\n" + string(ls[2])
	d := NewDecoder("node2's stream", strings.NewReader(in))
	for i := 0; i < 2; i++ {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := d.Next()
	fe := asFormatError(t, err)
	if fe.Truncated || fe.Offset != int64(len(good)) || fe.Line != 3 || !strings.Contains(fe.Msg, "invalid JSON") {
		t.Fatalf("got %+v, want invalid JSON at byte %d, line 3", fe, len(good))
	}
	if f, again := d.Next(); f != nil || again != err {
		t.Fatalf("after the error: %v, %v; want the same error", f, again)
	}
	if d.Offset() != int64(len(good)) {
		t.Fatalf("offset %d, want %d", d.Offset(), len(good))
	}
}

// What a stream can begin with instead of a recording: nothing (ssh never
// ran the command), a shell's banner, a frame that is not the header.
func TestDecoderFirstLine(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		empty          bool
	}{
		{"nothing", "", "empty file: not a gputop recording", true},
		{"banner", "Welcome to node1\n", "not a gputop recording: invalid JSON", false},
		{"no header", `{"type":"bye","pid":1,"t":1}` + "\n", `not a gputop recording: the first line is a "bye" frame`, false},
		{"newer", `{"type":"recording","v":99,"start":1}` + "\n", "recording format version 99 is not supported (this gputop reads versions 1 to 3)", false},
	} {
		_, err := NewDecoder("s", strings.NewReader(c.in)).Next()
		fe := asFormatError(t, err)
		if !strings.Contains(fe.Msg, c.want) || fe.Offset != 0 || fe.Empty != c.empty {
			t.Errorf("%s: %+v, want %q at byte 0 (empty %v)", c.name, fe, c.want, c.empty)
		}
	}
}

// A batch is checked whole before it is handed on: one whose lists
// disagree is an error naming them, on the fast path and off it.
func TestDecoderBadBatch(t *testing.T) {
	hdr := string(lines(small(t))[0])
	for _, line := range []string{
		`{"type":"nvml","dev":0,"t0":` + itoa(base) + `,"dt":[0,1],"used":[5]}`,
		`{"type": "nvml","dev":0,"t0":` + itoa(base) + `,"dt":[0,1],"used":[5]}`,
	} {
		d := NewDecoder("s", strings.NewReader(hdr+line+"\n"))
		d.Next()
		_, err := d.Next()
		fe := asFormatError(t, err)
		if fe.Msg != "nvml frame: dt has 2 samples but used has 1" || fe.Offset != int64(len(hdr)) {
			t.Errorf("%s: %+v", line, fe)
		}
	}
}

func itoa(v int64) string { return js(v) }

// LineBytes is the length of the line of the frame just returned, newline
// included, whatever lines (blank, skipped types) came between.
func TestDecoderLineBytes(t *testing.T) {
	header := `{"type":"recording","v":3,"start":1767225600000000000,"tool":"t"}`
	dev := `{"type":"device","index":0,"uuid":"GPU-1","name":"A","total":1}`
	long := `{"type":"device","index":1,"uuid":"GPU-2","name":"` + strings.Repeat("x", 100<<10) + `","total":1}`
	d := NewDecoder("t", strings.NewReader(header+"\n\n"+dev+"\n"+`{"type":"from_the_future"}`+"\n"+long+"\n"))
	for _, want := range []string{header, dev, long} {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
		if got := d.LineBytes(); got != int64(len(want)+1) {
			t.Errorf("LineBytes %d, want %d", got, len(want)+1)
		}
	}
}
