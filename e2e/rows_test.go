package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// rowAgent is a fake agent on gputop's socket: pid 4242 with torch
// devices cuda:0..devs-1, one GPU each.
func rowAgent(t *testing.T, sock string, devs int) *json.Encoder {
	t.Helper()
	var c net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go io.Copy(io.Discard, bufio.NewReader(c)) // answers, if any, are not the test's
	h := wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: 4242, Argv: []string{"train.py"}, T: time.Now().UnixNano()}
	for i := range devs {
		h.Devices = append(h.Devices, wire.AgentDevice{Index: i, UUID: fmt.Sprintf("GPU-fake-%d", i), Name: "Fake GPU", Total: 80 << 30})
	}
	enc := json.NewEncoder(c)
	if err := enc.Encode(h); err != nil {
		t.Fatal(err)
	}
	return enc
}

// csvColumn is the values of one column of a CSV file, joined by commas.
func csvColumn(t *testing.T, path, col string) string {
	t.Helper()
	recs := readCSV(t, path)
	j := -1
	for i, h := range recs[0] {
		if h == col {
			j = i
		}
	}
	if j < 0 {
		t.Fatalf("%s has no column %q", path, col)
	}
	var out []string
	for _, r := range recs[1:] {
		out = append(out, r[j])
	}
	return strings.Join(out, ",")
}

// Three rows of one process on one GPU at one time, all labelled "step":
// x on the second deletes the second, r on the third renames the third,
// in the TUI's CSV and in its recording's export alike.
func TestEditTwinRowsInTerminal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	rec := filepath.Join(dir, "live.gputop")
	out := filepath.Join(dir, "live.csv")
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock, "--record", rec, "--csv", out)
	tm.waitFor("listening on")
	enc := rowAgent(t, sock, 1)
	at := time.Now().UnixNano()
	for i := range 3 {
		m := wire.Mark{Type: wire.TypeMark, T: at, Label: "step", Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i+1) << 30, Reserved: 4 << 30, Peak: 4 << 30}}}
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	tm.waitFor("3072.00")
	tm.keys("Tab", "Up") // the second
	tm.waitFor("selected row 2 of 3: step")
	tm.keys("x")
	tm.waitFor(`delete row "step"?`)
	tm.keys("Enter")
	tm.waitFor(`deleted row "step"`)
	tm.keys("Down")
	tm.waitFor("selected row 2 of 2: step")
	tm.keys("r", "C-u")
	tm.keys("-l", "third")
	tm.keys("Enter")
	tm.waitFor(`renamed row "step" to "third"`)
	tm.keys("q")
	tm.waitExit()
	const want = "step=1024.00,third=3072.00"
	pairs := func(path string) string {
		labels, mib := strings.Split(csvColumn(t, path, "label"), ","), strings.Split(csvColumn(t, path, "allocated_mb"), ",")
		var out []string
		for i := range labels {
			out = append(out, labels[i]+"="+mib[i])
		}
		return strings.Join(out, ",")
	}
	if got := pairs(out); got != want {
		t.Fatalf("the TUI's CSV: %s, want %s", got, want)
	}
	exported := filepath.Join(dir, "export.csv")
	if o, code := run(t, "export", rec, "--csv", exported); code != 0 {
		t.Fatalf("export: %d %s", code, o)
	}
	if got := pairs(exported); got != want {
		t.Fatalf("the recording's export: %s, want %s", got, want)
	}
}

// A TUI --record whose output stalled drops the rows it cannot queue;
// the user's rename of such a row is not recorded either (counted as
// dropped), so the recording still loads to its end: export keeps the
// renames of the rows it has.
func TestTUIRecordDropsEditOfDroppedRow(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	fifo := filepath.Join(dir, "rec.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// a reader that opens the FIFO and reads nothing yet: the recorder
	// fills the pipe, then its queue, then drops
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock, "--record", fifo)
	r := <-opened
	defer r.Close()
	tm.waitFor("listening on")
	enc := rowAgent(t, sock, 1)
	const marks = 10_000 // more rows than the pipe and the recorder's queue hold
	at := time.Now().UnixNano()
	for i := 1; i <= marks; i++ {
		m := wire.Mark{Type: wire.TypeMark, T: at + int64(i)*1000, Label: fmt.Sprintf("m%05d", i), Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i)}}}
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	tm.waitFor(fmt.Sprintf("m%05d", marks))
	// the output reads again; a snapshot after it all shows when the
	// recorder has caught up
	copied := filepath.Join(dir, "rec.gputop")
	cf, err := os.Create(copied)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(cf, r); cf.Close(); done <- err }()
	tm.keys("s")
	tm.waitFor("snapshot label:")
	tm.keys("C-u")
	tm.keys("-l", "caught up")
	tm.keys("Enter")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(copied); bytes.Contains(b, []byte(`"label":"caught up"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder never caught up")
		}
	}
	tm.keys("Tab", "Up") // the last mark, which the recorder dropped
	tm.waitFor(fmt.Sprintf("m%05d", marks) + " at")
	tm.keys("r", "C-u")
	tm.keys("-l", "late")
	tm.keys("Enter")
	tm.waitFor(`renamed row "m10000" to "late"`)
	tm.keys("g") // the first mark, which it wrote
	tm.waitFor("selected row 1 of")
	tm.keys("r", "C-u")
	tm.keys("-l", "first")
	tm.keys("Enter")
	tm.waitFor(`renamed row "m00001" to "first"`)
	tm.keys("q")
	tm.waitExit()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(copied)
	written := false
	for _, l := range bytes.Split(data, []byte("\n")) {
		written = written || bytes.Contains(l, []byte(`"type":"snapshot"`)) && bytes.Contains(l, []byte(`"label":"m10000"`))
	}
	if !bytes.Contains(data, []byte(`"type":"dropped"`)) || written {
		t.Fatalf("the recorder did not drop the last mark's row (%d bytes)", len(data))
	}
	exported := filepath.Join(dir, "export.csv")
	o, code := run(t, "export", copied, "--csv", exported)
	if code != 0 || strings.Contains(o, "skipped a row_edit") {
		t.Fatalf("export: %d %s", code, o)
	}
	if labels := csvColumn(t, exported, "label"); !strings.HasPrefix(labels, "first,m00002,") || strings.Contains(labels, "late") {
		t.Fatalf("exported labels %.200s", labels)
	}
	if !strings.Contains(o, "the recorder dropped") {
		t.Errorf("export does not say what the recorder dropped: %s", o)
	}
}

// A label of a megabyte is cut where it comes in, and a mark of 100
// devices makes rows for the first wire.MaxMarkRows: the TUI says both, and
// its recording stays small. The agent names 64 GPUs, the most a hello may
// (agentlink.MaxHelloDevices), and its mark lists them over and over.
func TestLongLabelAndWideMarkInTerminal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	rec := filepath.Join(dir, "live.gputop")
	tm := startTerm(t, 200, 50, "--source", "agent", "--socket", sock, "--record", rec)
	tm.waitFor("listening on")
	const devs, gpus = 100, 64
	enc := rowAgent(t, sock, gpus)
	m := wire.Mark{Type: wire.TypeMark, T: time.Now().UnixNano(), Label: "wide " + strings.Repeat("y", wire.MaxFrameBytes-20_000)}
	for i := range devs {
		m.Devs = append(m.Devs, wire.DevStats{Dev: i % gpus, Allocated: 1 << 30})
	}
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	tm.waitFor(fmt.Sprintf("%d devices of marks past %d got no row", devs-wire.MaxMarkRows, wire.MaxMarkRows))
	tm.waitFor("1 labels cut to 256 bytes (…)")
	tm.keys("q")
	tm.waitExit()
	exported := filepath.Join(dir, "export.csv")
	if o, code := run(t, "export", rec, "--csv", exported); code != 0 {
		t.Fatalf("export: %d %s", code, o)
	}
	labels := strings.Split(csvColumn(t, exported, "label"), ",")
	if len(labels) != wire.MaxMarkRows || len(labels[0]) > wire.MaxLabelBytes || !strings.HasSuffix(labels[0], wire.LabelCut) {
		t.Fatalf("%d rows exported, the first labelled %d bytes", len(labels), len(labels[0]))
	}
	if fi, err := os.Stat(rec); err != nil || fi.Size() > 200<<10 {
		t.Fatalf("the recording: %v bytes, %v", fi.Size(), err)
	}
}
