package memdump

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// The dumps in testdata/memdump were made on an H200 by make_dumps.py
// (beside them); info.json holds what that run saw.
const dir = "../testdata/memdump"

type runInfo struct {
	OOMArgs    []uint64 `json:"oom_observer_args"` // device, alloc, device limit, device free
	HeldBlocks int      `json:"held_blocks"`
	Labelled   struct {
		Segments int `json:"segments"`
		Traces   int `json:"traces"`
	} `json:"labelled.pickle"`
	OOM struct {
		Segments int `json:"segments"`
		Traces   int `json:"traces"`
	} `json:"oom.pickle"`
}

func info(t *testing.T) runInfo {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ri runInfo
	if err := json.Unmarshal(b, &ri); err != nil {
		t.Fatal(err)
	}
	return ri
}

// lineOf is the line of make_dumps.py that holds code.
func lineOf(t *testing.T, code string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "make_dumps.py"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, code) {
			if found != 0 {
				t.Fatalf("%q is on lines %d and %d", code, found, i+1)
			}
			found = i + 1
		}
	}
	if found == 0 {
		t.Fatalf("%q is not in make_dumps.py", code)
	}
	return found
}

// torchSums is what torch itself says of each device's segments: the sum
// of their total_size and allocated_size, read with the pickle library
// alone, not through summarise.
func torchSums(t *testing.T, path string) map[int][2]uint64 {
	t.Helper()
	v, err := pickle.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := v.(*types.Dict).Get("segments")
	out := map[int][2]uint64{}
	for _, sv := range *segs.(*types.List) {
		s := sv.(*types.Dict)
		d, _ := s.Get("device")
		tot, _ := s.Get("total_size")
		al, _ := s.Get("allocated_size")
		a, _ := toUint(tot)
		b, _ := toUint(al)
		x := out[d.(int)]
		out[d.(int)] = [2]uint64{x[0] + a, x[1] + b}
	}
	return out
}

func TestOOMDump(t *testing.T) {
	ri := info(t)
	path := filepath.Join(dir, "oom.pickle")
	d, err := ReadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !d.History || len(d.Devices) != 1 {
		t.Fatalf("history %v, %d devices; want history on one device", d.History, len(d.Devices))
	}
	dv := d.Devices[0]
	sums := torchSums(t, path)[dv.Index]
	if dv.Reserved != sums[0] || dv.Allocated != sums[1] {
		t.Errorf("reserved %d allocated %d; torch's segments say %d and %d", dv.Reserved, dv.Allocated, sums[0], sums[1])
	}
	if dv.Segments != ri.OOM.Segments || dv.Trace != ri.OOM.Traces {
		t.Errorf("%d segments, %d trace entries; the run saw %d and %d", dv.Segments, dv.Trace, ri.OOM.Segments, ri.OOM.Traces)
	}
	o := dv.OOM
	if o == nil {
		t.Fatal("no OOM found in the history")
	}
	if o.Requested != ri.OOMArgs[1] || o.DeviceFree != ri.OOMArgs[3] {
		t.Errorf("OOM asked %d with %d free; the observer was told %d and %d", o.Requested, o.DeviceFree, ri.OOMArgs[1], ri.OOMArgs[3])
	}
	line := lineOf(t, "hold.append(torch.empty(8 << 30")
	if o.Frame.Line != line || !strings.HasSuffix(o.Frame.File, "make_dumps.py") || o.Label != "OOM" {
		t.Errorf("OOM at %v under %q; want make_dumps.py:%d under \"OOM\"", o.Frame, o.Label, line)
	}
	if o.LargestFree != dv.LargestFree || o.LargestFree == 0 || o.LargestFree >= o.Requested {
		t.Errorf("largest free block %d (device's %d): want the device's, nonzero, below the request %d",
			o.LargestFree, dv.LargestFree, o.Requested)
	}
	top := dv.Live[0]
	if top.Frame != o.Frame || top.Blocks != ri.HeldBlocks || top.Bytes != uint64(ri.HeldBlocks)*ri.OOMArgs[1] {
		t.Errorf("top frame %v: %d blocks of %d bytes; want the OOM's line with the %d blocks of %d held",
			top.Frame, top.Blocks, top.Bytes, ri.HeldBlocks, ri.OOMArgs[1])
	}
	if strings.Join(top.Labels, ",") != "OOM" {
		t.Errorf("top frame's labels %q, want OOM", top.Labels)
	}
	for i := 1; i < len(dv.Live); i++ {
		if dv.Live[i].Bytes > dv.Live[i-1].Bytes {
			t.Errorf("frames not largest first: %d then %d", dv.Live[i-1].Bytes, dv.Live[i].Bytes)
		}
	}
}

func TestLabelledDump(t *testing.T) {
	ri := info(t)
	path := filepath.Join(dir, "labelled.pickle")
	d, err := ReadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	dv := d.Devices[0]
	sums := torchSums(t, path)[dv.Index]
	if dv.Reserved != sums[0] || dv.Allocated != sums[1] || dv.Segments != ri.Labelled.Segments || dv.Trace != ri.Labelled.Traces {
		t.Errorf("reserved %d allocated %d, %d segments %d entries; torch: %d %d, the run: %d %d",
			dv.Reserved, dv.Allocated, dv.Segments, dv.Trace, sums[0], sums[1], ri.Labelled.Segments, ri.Labelled.Traces)
	}
	if dv.OOM != nil {
		t.Errorf("an OOM in a dump taken before any: %+v", dv.OOM)
	}
	if dv.Reserved != dv.Allocated+dv.Free {
		t.Errorf("reserved %d != allocated %d + free %d (no block was waiting for a stream)", dv.Reserved, dv.Allocated, dv.Free)
	}
	// the model's forward is inside nn.Linear: the frame shown is the
	// training loop's line that called it, and the leak keeps one output
	// (and its graph) of each of the 60 steps
	want := lineOf(t, "loss = model(xb).pow(2).mean()")
	top := dv.Live[0]
	if top.Frame.Line != want || top.Frame.Name != "<module>" || top.Blocks < 60 {
		t.Errorf("top frame %v with %d blocks; want make_dumps.py:%d <module> with at least 60", top.Frame, top.Blocks, want)
	}
	if strings.Join(top.Labels, ",") != "Epoch 1,Epoch 2" {
		t.Errorf("top frame's labels %q; want both epochs", top.Labels)
	}
}

func TestPlainDump(t *testing.T) {
	d, err := ReadFile(context.Background(), filepath.Join(dir, "plain.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if d.History {
		t.Error("history found in a dump taken with it off")
	}
	dv := d.Devices[0]
	if len(dv.Live) != 1 || dv.Live[0].Frame != (Frame{}) || dv.Live[0].Bytes != 4<<20 {
		t.Errorf("live %+v; want the one 4 MiB tensor, without a stack", dv.Live)
	}
	var b bytes.Buffer
	if err := WriteText(&b, d, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no allocation history") {
		t.Errorf("the text does not say that history was off:\n%s", b.String())
	}
}

func readBytes(t *testing.T, data []byte) (*Dump, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dump.pickle")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadFile(context.Background(), p)
}

func TestTruncatedDump(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join(dir, "oom.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 11, 100, len(whole) / 2, len(whole) - 1} {
		_, err := readBytes(t, whole[:n])
		var re *ReadError
		if !errors.As(err, &re) || !re.Truncated || re.Offset != int64(n) {
			t.Errorf("cut at %d: %v; want a truncation at byte %d", n, err, n)
			continue
		}
		if want := fmt.Sprintf("truncated at byte %d", n); !strings.Contains(err.Error(), want) {
			t.Errorf("cut at %d: %q does not say %q", n, err, want)
		}
	}
}

func TestCorruptDump(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join(dir, "labelled.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	// protocol 4: PROTO 4 (2 bytes), FRAME and its 8-byte size, then the
	// first opcode at byte 11; STOP is the last byte
	if whole[0] != 0x80 || whole[2] != 0x95 || whole[len(whole)-1] != '.' {
		t.Fatalf("labelled.pickle does not start with PROTO, FRAME or end with STOP: % x", whole[:12])
	}
	// no such opcodes (0xff would make the library index past its table)
	for _, c := range []struct {
		op   byte
		want string
	}{{0xfe, "unknown opcode: 0xfe"}, {0xff, "unknown opcode: 0xff"}} {
		for _, at := range []int{11, len(whole) - 1} {
			bad := bytes.Clone(whole)
			bad[at] = c.op
			_, err := readBytes(t, bad)
			var re *ReadError
			if !errors.As(err, &re) || re.Truncated || re.Offset != int64(at) {
				t.Errorf("%#x at %d: %v; want an error at byte %d", c.op, at, err, at)
				continue
			}
			if want := fmt.Sprintf("not a readable pickle at byte %d: %s", at, c.want); !strings.Contains(err.Error(), want) {
				t.Errorf("%#x at %d: %q does not say %q", c.op, at, err, want)
			}
		}
	}
	// a frame claiming more bytes than the file has: cut short
	bad := bytes.Clone(whole)
	bad[10] = 0x7f
	if _, err := readBytes(t, bad); err == nil || !strings.Contains(err.Error(), "byte") {
		t.Errorf("a frame size past the end: %v", err)
	}
}

func TestNotADump(t *testing.T) {
	for _, c := range []struct {
		name, data, want string
	}{
		{"text", "segments: none\n", "not a readable pickle at byte"},
		{"an integer", "\x80\x04K\x05.", "not a torch memory dump: the pickle holds an integer"},
		{"a dict without segments", "\x80\x04}\x94.", `a dict without "segments"`},
		{"a class", "\x80\x04\x8c\x02os\x8c\x06system\x93.", "names the class os.system"},
	} {
		_, err := readBytes(t, []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

func TestTextIsPrintable(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join(dir, "oom.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	// the same length, so the pickle's string lengths still hold
	from, to := []byte("/work/main/"), []byte("\x1b]0;pwned\x07/")
	if len(from) != len(to) || !bytes.Contains(whole, from) {
		t.Fatal("the dump has no /work/main/ to replace")
	}
	d, err := readBytes(t, bytes.ReplaceAll(whole, from, to))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteText(&b, d, 0); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(b.Bytes(), 0x1b) || bytes.ContainsRune(b.Bytes(), 0x07) || !strings.Contains(b.String(), "\ufffd/.scratch/make_dumps.py:") {
		t.Errorf("escape sequences from frames reached the text:\n%q", b.String())
	}
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "make_dumps.py:") && !strings.Contains(sc.Text(), "\ufffd") {
			t.Errorf("a frame line without the replacement character: %q", sc.Text())
		}
	}
}
