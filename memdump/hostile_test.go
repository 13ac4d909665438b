package memdump

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The hostile dumps beside the real ones (make_hostile.py).
const hostile = "../testdata/memdump/hostile"

// allocated is what f allocates, cumulatively (runtime.MemStats'
// TotalAlloc: the test's other goroutines are idle meanwhile).
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

func le(width int, n uint64) string {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, n)
	return string(b[:width])
}

// Every length a pickle declares is held to what is left of the file
// before anything is allocated: each of these once made gopickle allocate
// the length at once (100 GiB: "fatal error: runtime: out of memory",
// which nothing can recover).
func TestDeclaredLengthsBoundedByTheFile(t *testing.T) {
	cases := []struct{ name, data, op string }{
		{"frame-100g.pickle", "", "FRAME"},
		{"binunicode8-100g.pickle", "", "BINUNICODE8"},
		{"binbytes8-1t.pickle", "", "BINBYTES8"},
		{"bytearray8-1t.pickle", "", "BYTEARRAY8"},
		{"BINUNICODE 4 GiB", "\x80\x04X" + le(4, 1<<32-1) + ".", "BINUNICODE"},
		{"BINBYTES 4 GiB", "\x80\x04B" + le(4, 1<<32-1) + ".", "BINBYTES"},
		{"BINSTRING 2 GiB", "\x80\x02T" + le(4, 1<<31-1) + ".", "BINSTRING"},
		{"SHORT_BINUNICODE past the end", "\x80\x04\x8c\xff.", "SHORT_BINUNICODE"},
		// inside a frame: refused when the frame is read, before gopickle
		// runs a byte of it
		{"BINUNICODE8 in a frame", "\x80\x04\x95" + le(8, 10) + "\x8d" + le(8, 100<<30) + "\x94.", "BINUNICODE8"},
		{"FRAME after a frame", "\x80\x04\x95" + le(8, 9) + "\x95" + le(8, 1<<40) + "}.", "FRAME"},
	}
	for _, c := range cases {
		data := []byte(c.data)
		if data == nil || c.data == "" {
			var err error
			if data, err = os.ReadFile(filepath.Join(hostile, c.name)); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		got := allocated(func() { _, err = readBytes(t, data) })
		var re *ReadError
		if !errors.As(err, &re) || !re.Truncated || re.Offset != int64(len(data)) {
			t.Errorf("%s: %v; want a truncation at byte %d", c.name, err, len(data))
			continue
		}
		if !strings.Contains(err.Error(), c.op+" at byte ") || !strings.Contains(err.Error(), "are left in the file") {
			t.Errorf("%s: %q does not name %s and what is left", c.name, err, c.op)
		}
		if got > 4<<20 {
			t.Errorf("%s: reading %d bytes allocated %d", c.name, len(data), got)
		}
	}
	// the 13-byte FRAME, word for word
	_, err := ReadFile(context.Background(), filepath.Join(hostile, "frame-100g.pickle"))
	if want := "frame-100g.pickle: truncated at byte 13: FRAME at byte 2 declares 107374182400 bytes (100.0 GiB), 2 are left in the file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v; want %q", err, want)
	}
}

// 82 KB of shared references (20,000 segments × 20,000 blocks × 1000
// frames, all the same objects) once kept the reader busy for hours: the
// visits run out instead, quickly.
func TestSharedReferencesWithinVisits(t *testing.T) {
	path := filepath.Join(hostile, "shared-refs.pickle")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // main: hours
	defer cancel()
	var c cost
	f, _ := os.Open(path)
	defer f.Close()
	_, err = read(ctx, f, path, st.Size(), &c)
	var be *BudgetError
	if !errors.As(err, &be) || be.Budget != "visits" || be.Limit != VisitsPerByte*st.Size()+VisitsBase {
		t.Fatalf("%v; want the visit budget of %d", err, VisitsPerByte*st.Size()+VisitsBase)
	}
	if c.visits != be.Limit+1 && c.visits <= be.Limit {
		t.Errorf("stopped after %d visits, the limit is %d", c.visits, be.Limit)
	}
	for _, want := range []string{"shared-refs.pickle: over the reader's budget of 1377616 visits (4 for each byte of its 80.3 KiB, plus 1048576)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// nested is size bytes of lists each put in the one before: ]]]…]aaa…a.
func nested(size int) []byte {
	n := (size - 3) / 2
	return []byte("\x80\x04" + strings.Repeat("]", n) + strings.Repeat("a", n-1) + ".")
}

// A pickle of nested lists, of MARKs or of memoized lists costs gopickle
// 160-460 bytes a byte: decoding stops at the memory budget, having
// allocated no more than it.
func TestNestingWithinMemory(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"nested lists", nested(512 << 10)},
		{"MARKs", []byte("\x80\x04" + strings.Repeat("(", 512<<10) + ".")},
		{"memoized lists", []byte("\x80\x04" + strings.Repeat("]\x94", 256<<10) + ".")},
	} {
		size := int64(len(c.data))
		var err error
		var est cost
		got := allocated(func() { _, err = read(context.Background(), bytes.NewReader(c.data), c.name, size, &est) })
		var be *BudgetError
		if !errors.As(err, &be) || be.Budget != "memory" || be.Limit != MemoryPerByte*size+MemoryBase {
			t.Errorf("%s: %v; want the memory budget", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.name+": over the reader's memory budget at byte ") {
			t.Errorf("%s: %q", c.name, err)
		}
		if int64(got) > be.Limit {
			t.Errorf("%s: allocated %d reading %d bytes, past the budget of %d", c.name, got, size, be.Limit)
		}
		if est.estimate <= be.Limit {
			t.Errorf("%s: stopped at an estimate of %d, within the budget of %d", c.name, est.estimate, be.Limit)
		}
	}
}

// The real dumps are read well within both budgets.
func TestRealDumpsWithinBudget(t *testing.T) {
	for _, name := range []string{"plain.pickle", "labelled.pickle", "oom.pickle"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		size := int64(len(data))
		var c cost
		var got uint64
		got = allocated(func() { _, err = read(context.Background(), bytes.NewReader(data), name, size, &c) })
		if err != nil {
			t.Fatal(err)
		}
		if c.estimate > (MemoryPerByte*size)/3+1<<20 || c.visits > (VisitsPerByte*size)/30+1000 {
			t.Errorf("%s (%d bytes): estimated %d bytes, %d visits; want at most a third of %d and a thirtieth of %d",
				name, size, c.estimate, c.visits, MemoryPerByte*size, VisitsPerByte*size)
		}
		if int64(got) > c.estimate+4<<20 {
			t.Errorf("%s: allocated %d, estimated %d", name, got, c.estimate)
		}
	}
}

// Opcodes no torch dump holds are refused where they are, and so are
// integers past 64 bits by far (decoding them is quadratic).
func TestRefusedOpcodes(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"os.system", "cos\nsystem\n(S'ls'\ntR.", "names the class os.system"},
		{"REDUCE", "\x80\x04)\x85R.", "not a readable pickle at byte 4: REDUCE builds an object"},
		{"a set", "\x80\x04\x8f.", "EMPTY_SET makes a set"},
		{"LONG4", "\x80\x04\x8b" + le(4, 1000) + strings.Repeat("\x01", 1000) + ".", "at byte 2: LONG4 of 1000 bytes"},
		{"LONG", "\x80\x02L" + strings.Repeat("7", 1000) + "\n.", "at byte 2: LONG with an integer of more than 80 characters"},
		{"GET", "\x80\x02]p0\ng" + strings.Repeat("1", 100) + "\n.", "at byte 6: GET with a memo index of more than 32 characters"},
		{"APPEND", "\x80\x04]a.", "at byte 3: APPEND needs 2 value(s) on the stack, it has 1"},
		{"POP_MARK", "\x80\x04N1.", "at byte 3: POP_MARK without a MARK before it"},
	} {
		_, err := readBytes(t, []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// A read ends when its context does, in the decoding and in the summary.
func TestReadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ReadFile(ctx, filepath.Join(dir, "oom.pickle"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read: %v", err)
	}
	// cancelled while summing up 82 KB of shared references
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := ReadFile(ctx, filepath.Join(hostile, "shared-refs.pickle"))
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		var be *BudgetError
		if !errors.Is(err, context.Canceled) && !errors.As(err, &be) {
			t.Errorf("cancelled: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read went on for 30 s after it was cancelled")
	}
}

// A FIFO (or a device) named as a dump is refused, not opened for reading
// until a writer comes.
func TestDumpNotARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "dump.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := ReadFile(context.Background(), fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := ReadFile(context.Background(), "/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file (a device)") {
		t.Errorf("/dev/zero: %v", err)
	}
}

// dumpPickle is a small dump as torch's pickle would hold it:
// one segment with a live block allocated at file:7 f under "Epoch 1",
// and that allocation and an OOM in the history.
func dumpPickle(file string) []byte {
	var b bytes.Buffer
	frames := "](}(\x8c\x08filenameX" + le(4, uint64(len(file))) + file + "\x8c\x04lineK\x07\x8c\x04name\x8c\x01fue"
	b.WriteString("\x80\x04}(\x8c\x08segments](}(\x8c\x06deviceK\x00\x8c\x0atotal_sizeK\x09\x8c\x06blocks](")
	b.WriteString("}(\x8c\x04sizeK\x01\x8c\x07addressK\x10\x8c\x05state\x8c\x10active_allocated\x8c\x06frames" + frames + "u")
	b.WriteString("}(\x8c\x04sizeK\x08\x8c\x05state\x8c\x08inactiveu")
	b.WriteString("eue") // blocks, segment, segments
	b.WriteString("\x8c\x0ddevice_traces]](")
	b.WriteString("}(\x8c\x06action\x8c\x05alloc\x8c\x04addrK\x10\x8c\x0duser_metadata\x8c\x07Epoch 1u")
	b.WriteString("}(\x8c\x06action\x8c\x03oom\x8c\x04sizeK\x40\x8c\x0bdevice_freeK\x02\x8c\x06frames" + frames + "u")
	b.WriteString("ea") // the trace, device_traces
	b.WriteString("u.")
	return b.Bytes()
}

func TestDumpPickle(t *testing.T) {
	d, err := readBytes(t, dumpPickle("train.py"))
	if err != nil {
		t.Fatal(err)
	}
	dv := d.Devices[0]
	if len(dv.Live) != 1 || dv.Live[0].Frame != (Frame{"train.py", 7, "f"}) || strings.Join(dv.Live[0].Labels, ",") != "Epoch 1" ||
		dv.OOM == nil || dv.OOM.Requested != 64 || dv.OOM.LargestFree != 8 || dv.Reserved != 9 {
		t.Errorf("%+v", d)
	}
}

// Names and labels past maxText are cut, and the text says how many.
func TestLongNamesCut(t *testing.T) {
	long := strings.Repeat("a", 10000) + ".py"
	d, err := readBytes(t, dumpPickle(long))
	if err != nil {
		t.Fatal(err)
	}
	f := d.Devices[0].Live[0].Frame
	// the block's frame and the OOM's
	if len(f.File) != maxText+len("…") || !strings.HasSuffix(f.File, "…") || d.Cut != 2 {
		t.Errorf("file name of %d bytes, %d cut; want %d bytes and …, two cut", len(f.File), d.Cut, maxText)
	}
	var out bytes.Buffer
	WriteText(&out, d, 0)
	if want := "2 file names, function names or labels longer than 4.0 KiB: cut to it"; !strings.Contains(out.String(), want) {
		t.Errorf("the text does not say %q:\n%.500s", want, out.String())
	}
}
