package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func TestCreateUnwritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(dir, "no", "such", "dir", "run.gputop"),
		filepath.Join(file, "run.gputop"), // parent is a file
		dir,                               // a directory
		"/dev/full",                       // the header write fails: no space
	} {
		w, err := Create(path, header())
		if err == nil {
			w.Close()
			t.Errorf("%s: Create succeeded", path)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
}

func TestCreateTruncatesAndWritesHeader(t *testing.T) {
	path := tempPath(t, "r.gputop")
	if err := os.WriteFile(path, bytes.Repeat([]byte("old data\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path, wire.Recording{Comment: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// the header is in the file before anything else happens
	data := readFile(t, path)
	ls := lines(data)
	if len(ls) != 1 || !bytes.HasPrefix(data, []byte(fmt.Sprintf(`{"type":"recording","v":%d,"start":`, FormatVersion))) || !bytes.Contains(data, []byte(`"comment":"c"`)) {
		t.Fatalf("file after Create: %q", data)
	}
	if _, err := LoadReader("r", bytes.NewReader(data), store.New(liveOptions())); err != nil {
		t.Fatalf("header alone does not load: %v", err)
	}
}

// Samples reach the file within about flushEvery with no further call: a
// recorder killed later keeps them.
func TestBackgroundFlush(t *testing.T) {
	path := tempPath(t, "bg.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := int64(0); i < 50; i++ { // 50 ms of samples: no batch is full
		w.NVML(0, base+i*ms, 1<<30, 0)
	}
	w.Frame(wire.Bye{PID: 3, T: base})
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Contains(readFile(t, path), []byte(`"type":"nvml"`)) {
		if time.Now().After(deadline) {
			t.Fatal("pending samples never reached the file without Flush")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// copy the file as it is, as if the recorder had been killed now
	data := readFile(t, path)
	st := store.New(replayOptions())
	info, err := LoadReader("copy", bytes.NewReader(data), st)
	if err != nil {
		t.Fatal(err)
	}
	if info.Samples != 50 {
		t.Fatalf("%d samples in the copy, want 50", info.Samples)
	}
	// and with half a line more, as a kill in the middle of a write would leave
	cut := append(data, `{"type":"nvml","dev":0,"t0":17600`...)
	info, err = LoadReader("copy", bytes.NewReader(cut), store.New(replayOptions()))
	if fe := asFormatError(t, err); !fe.Truncated || fe.Offset != int64(len(data)) || info.Samples != 50 {
		t.Fatalf("got %v, %d samples", err, info.Samples)
	}
}

// Many sources at once: every sample is either written or counted as
// dropped, the file loads, and the loaded counts match.
func TestConcurrentSources(t *testing.T) {
	path := tempPath(t, "c.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	const devs, n = 8, 5000
	var wg sync.WaitGroup
	for d := 0; d < devs; d++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < n; i++ {
				w.NVML(d, base+i*ms, uint64(d)<<30+uint64(i%3), 7)
				if i%100 == 0 {
					w.Frame(wire.DevError{T: base + i*ms, Dev: d, Error: "x"})
				}
				if i == n/2 {
					w.Flush()
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	if s.Samples+s.DroppedSamples != devs*n || s.DroppedFrames != 0 {
		t.Fatalf("stats %+v: want %d samples written or dropped", s, devs*n)
	}
	st := store.New(replayOptions())
	info, err := Load(path, st)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(info.Samples) != s.Samples || info.Frames != int(s.Lines)-1 || int64(s.Bytes) != info.Bytes {
		t.Fatalf("loaded %+v, writer %+v", info, s)
	}
	for d := 0; d < devs; d++ {
		v, tt, ok := st.Latest(store.Key{Dev: d, Metric: store.NVMLUsed})
		if s.DroppedSamples == 0 && (!ok || v != uint64(d)<<30+uint64((n-1)%3) || tt != base+(n-1)*ms) {
			t.Errorf("device %d: latest %d@%d", d, v, tt)
		}
	}
}

// In the steady state NVML does not allocate.
func TestNVMLDoesNotAllocate(t *testing.T) {
	w, err := Create(tempPath(t, "a.gputop"), header())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var i int64
	step := func() {
		w.NVML(int(i%2), base+i*ms/2, 1<<30, 1<<29)
		i++
	}
	for range 20_000 { // grow the batch buffers and the queue first
		step()
	}
	w.Flush()
	if a := testing.AllocsPerRun(20_000, step); a != 0 {
		t.Fatalf("NVML allocates %.3f times per sample", a)
	}
}

func TestCloseTwiceAndLateCalls(t *testing.T) {
	path := tempPath(t, "c2.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	w.NVML(0, base, 1, 2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	size := len(readFile(t, path))
	w.NVML(0, base+ms, 1, 2)
	w.Frame(wire.Bye{PID: 1, T: base})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(readFile(t, path)) != size {
		t.Fatal("the file changed after Close")
	}
	if s := w.Stats(); s.Samples != 1 || s.DroppedSamples != 1 || s.DroppedFrames != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// What is not a recording frame is not written; a frame longer than a
// recording line may be is dropped and counted (as too long, not with the
// frames a slow output cost) instead of making the file unloadable.
func TestFrameFiltering(t *testing.T) {
	path := tempPath(t, "f.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	w.Frame(wire.Mark{Type: wire.TypeMark, T: base, Label: "x"})
	w.Frame(wire.Reply{OK: true})       // (a value that is no frame at all no longer compiles)
	w.Frame(&wire.Bye{PID: 5, T: base}) // a pointer, Type left empty
	w.Frame(wire.Holders{PID: 5, T: base, Groups: []wire.HolderGroup{{Name: strings.Repeat("n", MaxLineBytes)}}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, path)
	ls := lines(data)
	at := strconv.FormatInt(base, 10)
	if len(ls) != 3 || string(ls[1]) != `{"type":"bye","pid":5,"t":`+at+"}\n" ||
		string(ls[2]) != `{"type":"dropped","t":`+at+`,"too_long":1}`+"\n" {
		t.Fatalf("file: %q", data)
	}
	if s := w.Stats(); s.DroppedTooLong != 1 || s.DroppedFrames != 0 {
		t.Fatalf("stats %+v: want the oversized holders counted as too long", s)
	}
	if info, err := LoadReader(path, bytes.NewReader(data), store.New(liveOptions())); err != nil || info.Dropped != (Drops{TooLong: 1}) {
		t.Fatalf("loaded %+v, %v: want the dropped holders counted", info.Dropped, err)
	}
}

// The recorder runs in a child process (this test binary) so the tests
// below can kill it or limit its file size without touching this process.
func TestMain(m *testing.M) {
	switch os.Getenv("GPUTOP_RECORDING_CHILD") {
	case "record":
		childRecord(os.Getenv("GPUTOP_RECORDING_FILE"), 0)
	case "fsize":
		childRecord(os.Getenv("GPUTOP_RECORDING_FILE"), 20_000)
	default:
		os.Exit(m.Run())
	}
}

// childRecord records synthetic samples at about 1 kHz on two devices with
// agent frames; with limit > 0 it caps its file size first (RLIMIT_FSIZE:
// writes past it fail with EFBIG, like a full disk) and records until the
// writer reports the error.
func childRecord(path string, limit uint64) {
	if limit > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(3)
		}
	}
	w, err := Create(path, header())
	if err != nil {
		fmt.Println("create:", err)
		os.Exit(3)
	}
	st := tap(store.New(liveOptions()), w)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 37, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: base, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	for i := int64(0); ; i++ {
		t := base + i*ms
		st.AddNVML(0, t, uint64(1<<30+i%100), 1<<29)
		st.AddNVML(1, t, uint64(2<<30+i%10), 1<<29)
		if i%10 == 0 {
			st.AgentSample(7, wire.Sample{Type: wire.TypeSample, T: t, Allocated: uint64(i), Reserved: uint64(2 * i), Peak: uint64(3 * i)})
		}
		if i%200 == 0 {
			st.TakeSnapshot("snapshot "+strconv.FormatInt(i, 10), 0, t, "key", nil)
		}
		if limit > 0 {
			if err := w.Err(); err != nil {
				cerr := w.Close()
				s := w.Stats()
				fmt.Printf("err=%v\nclose=%v\ndropped=%d\n", err, cerr, s.DroppedSamples+s.DroppedFrames)
				os.Exit(0)
			}
			if i > 200_000 {
				fmt.Println("no error after 200000 samples")
				os.Exit(4)
			}
			continue // as fast as it goes
		}
		if i%5 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func child(t *testing.T, mode, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUTOP_RECORDING_CHILD="+mode, "GPUTOP_RECORDING_FILE="+path)
	return cmd
}

// A recorder killed with SIGKILL leaves a file that loads: whole lines
// only (each is one write), or at worst a cut-off last line.
func TestKilledRecorder(t *testing.T) {
	for round := range 3 {
		path := tempPath(t, "killed.gputop")
		cmd := child(t, "record", path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			fi, err := os.Stat(path)
			if err == nil && fi.Size() > int64(20_000*(round+1)) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the recorder wrote nothing")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		st := store.New(replayOptions())
		info, err := Load(path, st)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !fe.Truncated {
				t.Fatalf("killed recording: %v", err)
			}
		}
		if info.Samples < 100 || len(st.Rows()) == 0 || len(st.Agents()) != 1 {
			t.Fatalf("killed recording kept %d samples, %d rows, %d agents", info.Samples, len(st.Rows()), len(st.Agents()))
		}
	}
}

// A write error (here: the file size limit, as a full disk would do) is
// kept in Err and returned by Close, the process does not panic, and the
// file is cut back to its last whole line, so it loads without error.
func TestWriteErrorKeepsFileLoadable(t *testing.T) {
	path := tempPath(t, "full.gputop")
	out, err := child(t, "fsize", path).CombinedOutput()
	if err != nil {
		t.Fatalf("recorder: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("err=recording "+path+": write")) || !bytes.Contains(out, []byte("file too large")) ||
		bytes.Contains(out, []byte("close=<nil>")) {
		t.Fatalf("recorder output:\n%s", out)
	}
	data := readFile(t, path)
	if len(data) > 20_000 || len(data) < 10_000 {
		t.Fatalf("file has %d bytes", len(data))
	}
	info, err := LoadReader("full", bytes.NewReader(data), store.New(replayOptions()))
	if err != nil {
		t.Fatalf("the file is not loadable after a write error: %v", err)
	}
	if info.Samples == 0 {
		t.Fatal("no samples kept")
	}
}

// Agent samples are written as one batch per process and device every
// 100 ms, not a line each; a process's batch goes out before what it said
// next (here: ended); counters round-trip exactly, wrapping ones included,
// and optional counters that stayed 0 take no room.
func TestAgentSamplesBatched(t *testing.T) {
	path := tempPath(t, "agent.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	st := tap(store.New(liveOptions()), w)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 37, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: base, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	var sent []wire.Sample
	for i := int64(0); i < 25; i++ {
		s := wire.Sample{Type: wire.TypeSample, T: base + i*10*ms + i*i*1000, Allocated: uint64(i) << 20,
			Reserved: 1 << 30, Peak: ^uint64(0) - uint64(i%2)}
		if i == 13 {
			s.Inactive, s.AllocRetries = 4096, 1
		}
		sent = append(sent, s)
		st.AgentSample(7, s)
	}
	st.AgentEnded(7, base+300*ms, false, "killed")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.AgentSamples != 25 || s.DroppedFrames != 0 {
		t.Fatalf("stats %+v", s)
	}
	data := readFile(t, path)
	var batches, ended int
	for i, l := range lines(data) {
		var h wire.Head
		if err := json.Unmarshal(l, &h); err != nil {
			t.Fatal(err)
		}
		switch h.Type {
		case wire.TypeSample:
			t.Fatalf("line %d: a single sample line: %s", i+1, l)
		case wire.TypeSamples:
			if ended > 0 {
				t.Fatalf("line %d: samples after the process ended", i+1)
			}
			var b wire.Samples
			if err := json.Unmarshal(l, &b); err != nil {
				t.Fatal(err)
			}
			var span int64
			for _, d := range b.DT[1:] {
				span += d
			}
			if b.PID != 7 || span > 2*int64(batchSpan) || b.ReservedPeak != nil || b.OOMs != nil || b.Dropped != nil {
				t.Fatalf("line %d: %s", i+1, l)
			}
			batches++
		case wire.TypeEnded:
			ended++
		}
	}
	if batches < 3 || batches > 4 || ended != 1 {
		t.Fatalf("%d sample batches and %d ended lines in 250 ms of samples:\n%s", batches, ended, data)
	}
	loaded := store.New(liveOptions())
	if _, err := LoadReader(path, bytes.NewReader(data), loaded); err != nil {
		t.Fatal(err)
	}
	for _, s := range sent {
		for m, want := range map[store.Metric]uint64{store.Allocated: s.Allocated, store.Reserved: s.Reserved, store.Peak: s.Peak} {
			if v, ok := loaded.ValueAt(store.Key{Dev: 0, PID: 7, Metric: m}, s.T); !ok || v != want {
				t.Fatalf("metric %v at %d: loaded %d,%v, sent %d", m, s.T, v, ok, want)
			}
		}
	}
	if last := loaded.Agents()[0].Last[0]; last != sent[24] {
		t.Fatalf("last sample: loaded %+v, sent %+v", last, sent[24])
	}
	if a, b := st.Agents(), loaded.Agents(); !reflect.DeepEqual(a, b) {
		t.Fatalf("agents:\n live   %+v\n loaded %+v", a, b)
	}
}

// A writer whose output (here a pipe nobody reads yet) falls behind drops
// lines instead of blocking the sources, and says how many in dropped
// lines: the loader's sum is the writer's count, and the samples written
// plus those dropped are all that were given. A pipe is not synced, so
// Close succeeds. (The reader is slow under -race on a loaded machine: Close
// gets a minute, not CloseWait, to drain what is queued.)
func TestDropsAreRecorded(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := NewWriter(header())
	if err := w.Start(pw, "pipe"); err != nil {
		t.Fatal(err)
	}
	// 200 samples a batch at 2 kHz: three times the queue in lines, more than
	// the queue and a chunk being written can hold
	const n = 3 * maxQueue * 200
	for i := int64(0); i < n; i++ {
		w.NVML(0, base+i*ms/2, uint64(i), 0)
	}
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		b.ReadFrom(r)
		got <- b.Bytes()
	}()
	if err := w.closeWithin(time.Minute); err != nil {
		t.Fatalf("Close on a pipe: %v", err)
	}
	data := <-got
	s := w.Stats()
	if s.DroppedSamples == 0 || s.Samples+s.DroppedSamples != n {
		t.Fatalf("stats %+v: want some of %d samples dropped", s, n)
	}
	info, err := LoadReader("pipe", bytes.NewReader(data), store.New(replayOptions()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Dropped != s.Drops() || uint64(info.Samples) != s.Samples || int64(s.Bytes) != info.Bytes {
		t.Fatalf("loaded %+v (dropped %+v), writer %+v", info, info.Dropped, s)
	}
}

// A writer that is closed before it was started (the recorder could not
// start its sources) writes nothing; one started later writes what was
// queued before.
func TestWriterBeforeStart(t *testing.T) {
	w := NewWriter(header())
	w.Frame(wire.Bye{PID: 5, T: base})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := tempPath(t, "late.gputop")
	f, _ := os.Create(path)
	if err := w.Start(f, path); err == nil {
		t.Fatal("Start after Close")
	}

	w = NewWriter(header())
	w.Frame(wire.Bye{PID: 5, T: base})
	f, _ = os.Create(path)
	if err := w.Start(f, path); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ls := lines(readFile(t, path)); len(ls) != 2 || !bytes.Contains(ls[1], []byte(`"bye"`)) {
		t.Fatalf("file: %q", ls)
	}
}

// A writer whose output stops taking lines (a pipe or FIFO whose reader
// opened it and stopped reading) is closed within the bound: what was
// still queued, and the line being written, are counted as dropped, the
// error is ErrStalled, and written plus dropped is every sample given. A
// non-blocking pipe (as gputop opens a FIFO) has its write woken, so the
// goroutine ends and what reached the pipe loads; a blocking one (a shell's
// redirect) is left to the write, which ends when the reader goes.
func TestCloseGivesUpOnStalledOutput(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) {
			var r, pw *os.File
			if blocking {
				var p [2]int
				if err := syscall.Pipe(p[:]); err != nil {
					t.Fatal(err)
				}
				r, pw = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
			} else {
				var err error
				if r, pw, err = os.Pipe(); err != nil {
					t.Fatal(err)
				}
			}
			defer r.Close()
			w := NewWriter(header())
			if err := w.Start(pw, "pipe"); err != nil {
				t.Fatal(err)
			}
			const n = 2 * maxQueue * 200 // more than the pipe, the queue and a chunk hold
			for i := int64(0); i < n; i++ {
				w.NVML(0, base+i*ms/2, uint64(i), 0)
			}
			const wait = 300 * time.Millisecond
			closed := make(chan error, 1)
			go func() { closed <- w.closeWithin(wait) }()
			var err error
			select {
			case err = <-closed:
			case <-time.After(wait + 10*time.Second):
				t.Fatal("Close still waiting for a stalled output")
			}
			if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "recording pipe: ") {
				t.Fatalf("Close: %v, want ErrStalled naming the output", err)
			}
			if err2 := w.Close(); err2 != err {
				t.Fatalf("second Close: %v, want %v", err2, err)
			}
			s := w.Stats()
			if s.DroppedSamples == 0 || s.Samples+s.DroppedSamples != n {
				t.Fatalf("stats %+v: want written + dropped = %d", s, n)
			}
			if !strings.Contains(w.DropSummary(), "the file ends where the output stopped") {
				t.Fatalf("summary %q", w.DropSummary())
			}
			if blocking {
				r.Close() // the blocked write fails (EPIPE) and the goroutine ends
				<-w.done
				if s2 := w.Stats(); s2 != s {
					t.Fatalf("counts changed after Close: %+v, then %+v", s, s2)
				}
				return
			}
			select {
			case <-w.done:
			case <-time.After(10 * time.Second):
				t.Fatal("the writer goroutine is still in its write after Close gave up")
			}
			data, _ := io.ReadAll(r)
			info, err := LoadReader("pipe", bytes.NewReader(data), store.New(replayOptions()))
			if err != nil {
				t.Fatal(err)
			}
			if uint64(info.Samples) != s.Samples {
				t.Fatalf("the pipe holds %d samples, the writer says %d written", info.Samples, s.Samples)
			}
		})
	}
}

// A frame whose line would be over MaxLineBytes is dropped for its size,
// not for the output's pace: it is counted apart (too_long in the dropped
// line, Drops.TooLong when loaded), said with the limit, and the lines
// after it are written.
func TestTooLongFrameCountedApart(t *testing.T) {
	path := tempPath(t, "long.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	w.Frame(wire.Hello{V: 1, PID: 7, T: base, Argv: []string{strings.Repeat("x", MaxLineBytes)}})
	w.Frame(wire.Hello{V: 1, PID: 8, T: base, Argv: []string{"short"}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	if s.DroppedTooLong != 1 || s.DroppedFrames != 0 {
		t.Fatalf("stats %+v: want the frame counted as too long, and only so", s)
	}
	want := "dropped 1 frame longer than a recording line may be (4 MiB)"
	if got := w.DropSummary(); !strings.Contains(got, want) || strings.Contains(got, "other frame") {
		t.Fatalf("summary %q, want %q", got, want)
	}
	data := readFile(t, path)
	if !bytes.Contains(data, []byte(`"too_long":1`)) || !bytes.Contains(data, []byte(`"short"`)) {
		t.Fatalf("file:\n%.300s", data)
	}
	info, err := LoadReader("long", bytes.NewReader(data), store.New(replayOptions()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Dropped != (Drops{TooLong: 1}) || info.Dropped.Behind().Any() {
		t.Fatalf("loaded drops %+v", info.Dropped)
	}
}
