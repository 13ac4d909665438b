package agentlink

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzDecodeFrame from the protocol vectors")

type badVector struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
	Reply *bool  `json:"reply"`
}

func loadExpected(t *testing.T) map[string]badVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]badVector
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	return m
}

func vectorFiles(t testing.TB) (valid, bad []string) {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(vectorDir, "*.ndjson"))
	if err != nil || len(all) == 0 {
		t.Fatalf("no vectors in %s (%v)", vectorDir, err)
	}
	for _, f := range all {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "bad_") {
			bad = append(bad, name)
		} else {
			valid = append(valid, name)
		}
	}
	return valid, bad
}

// Every line of every valid vector decodes, passes the checks, and encodes
// back to the very same bytes: the Python agent is held to those bytes.
func TestValidVectorsRoundTrip(t *testing.T) {
	valid, _ := vectorFiles(t)
	if len(valid) < 8 {
		t.Fatalf("only %d valid vectors: %v", len(valid), valid)
	}
	for _, name := range valid {
		t.Run(name, func(t *testing.T) {
			for i, line := range vectorLines(t, name) {
				if !bytes.HasSuffix(line, []byte("\n")) || bytes.Contains(line, []byte("\r")) {
					t.Fatalf("line %d must end with a single \\n: %q", i+1, line)
				}
				f, err := decodeFrame(line[:len(line)-1])
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				again, err := encodeLine(f)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, line) {
					t.Errorf("line %d is not in canonical form\n file: %s re-encoded: %s", i+1, line, again)
				}
			}
		})
	}
}

// The vectors that are whole connections pass the session's order checks.
func TestValidSessions(t *testing.T) {
	for _, name := range []string{"hello.ndjson", "hello_minimal.ndjson", "session.ndjson", "snap.ndjson", "status.ndjson"} {
		var s session
		for i, line := range vectorLines(t, name) {
			if _, err := s.next(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
				t.Errorf("%s line %d: %v", name, i+1, err)
			}
		}
	}
}

// Each bad vector is refused at the expected line with the expected reason,
// and every bad vector has an expectation (and the other way round).
func TestBadVectorsRefused(t *testing.T) {
	exp := loadExpected(t)
	_, bad := vectorFiles(t)
	sort.Strings(bad)
	seen := map[string]bool{}
	for _, name := range bad {
		seen[name] = true
		want, ok := exp[name]
		if !ok {
			t.Errorf("%s has no entry in expected.json", name)
			continue
		}
		if !strings.HasPrefix(want.Error, fmt.Sprintf("line %d: ", want.Line)) {
			t.Errorf("%s: expected error %q does not name line %d", name, want.Error, want.Line)
		}
		var s session
		var got error
		at := 0
		for i, line := range vectorLines(t, name) {
			if _, err := s.next(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
				got, at = err, i+1
				break
			}
		}
		if got == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if at != want.Line || !strings.HasPrefix(got.Error(), want.Error) {
			t.Errorf("%s: refused at line %d with %q; want line %d, %q", name, at, got, want.Line, want.Error)
		}
	}
	for name := range exp {
		if !seen[name] {
			t.Errorf("expected.json names %s, which does not exist", name)
		}
	}
}

// Over a real socket: each bad vector gets its reason in a reply frame and
// its connection closed, while one agent keeps streaming throughout and
// loses nothing; what a refused agent sent before stays in the store.
func TestBadVectorsOverSocket(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	exp := loadExpected(t)

	good := dial(t, srv.Path())
	good.sendFrame(hello(9001, wire.AgentDevice{Index: 0, UUID: uuidA, Name: "NVIDIA H200"}))
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n++
			b, _ := json.Marshal(sample(0, t0+int64(n)*ms, uint64(n)))
			if _, err := good.conn.Write(append(b, '\n')); err != nil {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()

	_, bad := vectorFiles(t)
	for _, name := range bad {
		want := exp[name]
		p := dial(t, srv.Path())
		// One write, errors ignored: gputop may close before the end of it.
		p.conn.Write(bytes.Join(vectorLines(t, name), nil))
		if want.Reply != nil && !*want.Reply {
			p.closed()
			continue
		}
		r := p.reply()
		if r.OK || !strings.HasPrefix(r.Error, want.Error) {
			t.Errorf("%s: reply %+v; want error starting %q", name, r, want.Error)
		}
		p.closed()
		srv.logs.wait(t, "closed: "+want.Error)
	}
	// A refused agent's hello (pid 4242, from the vectors) was kept, and it
	// is marked ended with the reason of its last refusal.
	a, ok := agentByPID(st, 4242)
	if !ok || a.Connected || !a.Ended || !strings.HasPrefix(a.EndReason, "closed: line ") {
		t.Errorf("refused agent 4242: %+v (found %v)", a, ok)
	}

	close(stop)
	n := <-sent
	good.sendFrame(wire.Bye{Type: wire.TypeBye, T: t0 + int64(n+1)*ms})
	waitFor(t, "good agent's bye", func() bool {
		a, _ := agentByPID(st, 9001)
		return !a.Connected
	})
	if got := st.Count(store.Key{Dev: 0, PID: 9001, Metric: store.Allocated}); got != uint64(n) || n == 0 {
		t.Errorf("streaming agent: %d samples in the store, sent %d", got, n)
	}
	if a, _ := agentByPID(st, 9001); a.Ended || a.EndReason != "bye" {
		t.Errorf("streaming agent ended as %+v", a)
	}
}

// A line over the limit is refused as soon as the limit is passed, without
// waiting for its newline; the hello before it stays.
func TestOversizedLine(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.send(vectorLines(t, "hello.ndjson")...)
	big := bytes.Repeat([]byte("x"), wire.MaxFrameBytes+1)
	go p.conn.Write(big) // gputop stops reading at the limit; this write may never finish
	r := p.reply()
	want := fmt.Sprintf("line 2: longer than %d bytes", wire.MaxFrameBytes)
	if r.OK || r.Error != want {
		t.Fatalf("reply %+v, want error %q", r, want)
	}
	p.closed()
	srv.logs.wait(t, "pid 4242 (train.py): closed: "+want)
	if a, ok := agentByPID(st, 4242); !ok || !a.Ended {
		t.Errorf("agent after oversized line: %+v", a)
	}

	// A line of exactly the limit is not too long (it is then refused as
	// JSON, which shows the limit itself was not hit).
	p2 := dial(t, srv.Path())
	p2.send(vectorLines(t, "hello.ndjson")...)
	p2.send(append(bytes.Repeat([]byte(" "), wire.MaxFrameBytes-2), '{', '}'))
	if r := p2.reply(); r.Error != `line 2: frame has no "type"` {
		t.Errorf("line of exactly %d bytes: %+v", wire.MaxFrameBytes, r)
	}
}

// session.ndjson fed to gputop ends up in the store as the README says.
func TestSessionVectorInStore(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.send(vectorLines(t, "session.ndjson")...)
	p.closed()
	waitFor(t, "bye", func() bool { a, _ := agentByPID(st, 4242); return !a.Connected })

	a, _ := agentByPID(st, 4242)
	if a.Ended || a.EndReason != "bye" || a.EndedAt != t0+60*ms {
		t.Errorf("end: ended=%v reason=%q at=%d", a.Ended, a.EndReason, a.EndedAt)
	}
	if a.OOMs != 1 || a.Holders == nil || a.Holders.ID != 1 || len(a.Holders.Groups) != 3 || a.Holders.Total != 16785408 {
		t.Errorf("oom/holders: ooms=%d holders=%+v", a.OOMs, a.Holders)
	}
	if !reflect.DeepEqual(a.DevMap, map[int]int{0: 1, 1: 0}) {
		t.Errorf("device map %v, want cuda:0->GPU 1, cuda:1->GPU 0", a.DevMap)
	}
	type row struct {
		label string
		dev   int
		alloc uint64
	}
	var got []row
	for _, s := range st.Rows() {
		got = append(got, row{s.Label, s.Dev, *s.Allocated})
	}
	want := []row{
		{"Training start", 1, 4 << 20}, {"Training start", 0, 0},
		{"eval (start)", 1, 8396800}, {"eval (end)", 1, 16785408},
		{"OOM", 1, 16785408},
		{"After cleanup", 1, 0}, {"After cleanup", 0, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows\n got %v\nwant %v", got, want)
	}
	// the end rows carry their walk's attribution, and their verdicts
	var ends []string
	for _, r := range summary.Rows(st.Rows(), st.Devices()) {
		if r.Verdict != nil {
			ends = append(ends, fmt.Sprintf("%s/%d: %s", r.Label, r.Dev, r.Verdict.Line()))
		}
	}
	wantEnds := []string{
		"eval (end)/1: ✗ eval (end): 11.5 MiB still held: optimizer (Adam) (8 tensors) 7.6 MiB, model (4 tensors float32[1000, 1000]) 3.8 MiB: " +
			"del optimizer; gputop.cleanup() (and 4.0 MiB cuBLAS workspaces, not a leak: gputop.cleanup() frees them; 570.5 KiB that nothing accounts for) [holders walk]",
		"After cleanup/1: ✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated) [holders walk]",
		"After cleanup/0: ✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated) [holders walk]",
	}
	if strings.Join(ends, "\n") != strings.Join(wantEnds, "\n") {
		t.Errorf("end rows\n got %s\nwant %s", strings.Join(ends, "\n"), strings.Join(wantEnds, "\n"))
	}
	// The latest sample of cuda:0 is on NVML GPU 1.
	if v, tt, ok := st.Latest(store.Key{Dev: 1, PID: 4242, Metric: store.Allocated}); !ok || v != 16785408 || tt != t0+30*ms {
		t.Errorf("GPU 1 allocated latest = %d at %d (%v)", v, tt, ok)
	}
	if v, _, ok := st.Latest(store.Key{Dev: 0, PID: 4242, Metric: store.Reserved}); !ok || v != 2097152 {
		t.Errorf("GPU 0 reserved latest = %d (%v)", v, ok)
	}
	srv.logs.wait(t, "pid 4242 (train.py): attached (torch 2.11.0+cu130; cuda:0 = GPU 1, cuda:1 = GPU 0)")
	srv.logs.wait(t, "pid 4242 (train.py): CUDA out of memory on cuda:0 (asked for 2048.0 MiB)")
	srv.logs.wait(t, "pid 4242 (train.py): detached")
}

func corpusDir() string { return filepath.Join("testdata", "fuzz", "FuzzDecodeFrame") }

// corpusEntries maps a corpus file name to its contents, one per vector line.
func corpusEntries(t testing.TB) map[string][]byte {
	valid, bad := vectorFiles(t)
	out := map[string][]byte{}
	for _, name := range append(valid, bad...) {
		for i, line := range vectorLines(t, name) {
			key := fmt.Sprintf("%s-%02d", strings.TrimSuffix(name, ".ndjson"), i+1)
			out[key] = []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", bytes.TrimSuffix(line, []byte("\n"))))
		}
	}
	return out
}

// The checked-in seed corpus is exactly the vectors' lines.
// go test ./agentlink -run TestFuzzCorpus -update-corpus rewrites it.
func TestFuzzCorpus(t *testing.T) {
	want := corpusEntries(t)
	if *updateCorpus {
		os.RemoveAll(corpusDir())
		if err := os.MkdirAll(corpusDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(corpusDir(), name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	have, err := os.ReadDir(corpusDir())
	if err != nil {
		t.Fatalf("%v (run with -update-corpus)", err)
	}
	for _, e := range have {
		b, err := os.ReadFile(filepath.Join(corpusDir(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[e.Name()]; !ok {
			t.Errorf("corpus file %s matches no vector line (run with -update-corpus)", e.Name())
		} else if !bytes.Equal(b, w) {
			t.Errorf("corpus file %s differs from its vector line (run with -update-corpus)", e.Name())
		}
		delete(want, e.Name())
	}
	for name := range want {
		t.Errorf("corpus file %s is missing (run with -update-corpus)", name)
	}
}

// FuzzDecodeFrame: no input panics the decoder or the session; an error
// always says something; an accepted frame re-encodes to a frame that is
// accepted again and encodes to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte(strings.Repeat("[", 10000)))
	f.Add([]byte(`{"type":"hello","v":1,"pid":1,"devices":null,"t":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var s session
		if _, err := s.next(line); err != nil && !strings.HasPrefix(err.Error(), "line 1: ") {
			t.Fatalf("session error without line number: %v", err)
		}
		v, err := decodeFrame(line)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if strings.Contains(frameType(v), ".") {
			t.Fatalf("decoded to %T", v)
		}
		b, err := encodeLine(v)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", v, err)
		}
		v2, err := decodeFrame(b[:len(b)-1])
		if err != nil {
			t.Fatalf("re-encoded frame refused: %v\n in: %q\nout: %s", err, line, b)
		}
		b2, err := encodeLine(v2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encoding not stable:\n%s\n%s", b, b2)
		}
	})
}
