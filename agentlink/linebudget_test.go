package agentlink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// The budget evicts the reader holding the most, the asker included.
func TestLineBudgetEvictsTheLargest(t *testing.T) {
	b := newLineBudget(100)
	var evicted []string
	reader := func(name string) *lineReader {
		return &lineReader{budget: b, onEvict: func(held, limit int) {
			evicted = append(evicted, fmt.Sprintf("%s:%d/%d", name, held, limit))
		}}
	}
	a, c, d := reader("a"), reader("c"), reader("d")
	if !b.grow(a, 60) || !b.grow(c, 30) {
		t.Fatal("room refused under the limit")
	}
	// d asks for 20: a, the largest, goes
	if !b.grow(d, 20) || strings.Join(evicted, " ") != "a:60/100" {
		t.Fatalf("evicted %v", evicted)
	}
	// d asks for 80 more: it would hold the most, so d goes, c stays
	if b.grow(d, 80) || strings.Join(evicted, " ") != "a:60/100 d:100/100" {
		t.Fatalf("evicted %v", evicted)
	}
	if used, peak := b.usage(); used != 30 || peak != 90 {
		t.Fatalf("used %d, peak %d; want 30 (c) and 90", used, peak)
	}
	if b.grow(a, 1) || b.grow(d, 1) {
		t.Fatal("an evicted reader got room again")
	}
	b.release(c)
	if used, _ := b.usage(); used != 0 {
		t.Fatalf("used %d after release", used)
	}
}

// Many real connections each send a hello, then most of a line at the
// 1 MiB limit without its newline, and wait. The server's buffers for
// unfinished lines stay within the budget (its counter, and the test
// process's own heap), the connections closed for it are logged with the
// reason, and a well-behaved agent keeps working: its samples arrive and
// its large holders report gets through, the largest unfinished line being
// closed to make room.
func TestUnfinishedLinesWithinBudget(t *testing.T) {
	const peers = 40
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	limit := srv.lines.limit

	good := dial(t, srv.Path())
	good.sendFrame(hello(500, wire.AgentDevice{Index: 0, UUID: uuidA}))
	good.sendFrame(sample(0, t0+ms, 1))
	key := store.Key{Dev: 0, PID: 500, Metric: store.Allocated}
	waitFor(t, "the good agent's first sample", func() bool { return st.Count(key) == 1 })

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// most of a line at the limit: every buffer growth but the last
	part := bytes.Repeat([]byte("x"), wire.MaxFrameBytes-1000)
	var wg sync.WaitGroup
	conns := make([]net.Conn, peers)
	for i := range conns {
		c, err := net.Dial("unix", srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		h, _ := json.Marshal(hello(1000+i, wire.AgentDevice{Index: 0, UUID: uuidB}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Write(append(h, '\n'))
			c.Write(part) // fails once gputop closes it for the budget
		}()
	}
	wg.Wait()
	// every peer has either been closed or has its whole part buffered
	waitFor(t, "every unfinished line read or its connection closed", func() bool {
		return allRead(srv, peers-len(closedForBudget(srv)), len(part))
	})

	used, peak := srv.lines.usage()
	closed := closedForBudget(srv)
	t.Logf("%d peers with %d KiB unfinished each: %d closed for the budget; unfinished lines hold %.1f MiB (at most %.1f MiB at any time), budget %.0f MiB",
		peers, len(part)>>10, len(closed), float64(used)/(1<<20), float64(peak)/(1<<20), float64(limit)/(1<<20))
	if peak > limit || used > limit {
		t.Fatalf("unfinished lines held %d bytes (peak %d), over the %d-byte budget", used, peak, limit)
	}
	// a reader's buffer past its first lineBufSize, once grown for the line
	fit := limit / (wire.MaxFrameBytes + 1 - lineBufSize)
	if len(closed) < peers-fit {
		t.Fatalf("only %d of %d peers closed, but the budget holds %d such lines", len(closed), peers, fit)
	}
	t.Logf("log: %s", closed[0])
	if !strings.Contains(closed[0], "of an unfinished line when the unfinished lines of all connections passed gputop's 16.0 MiB budget") {
		t.Fatalf("log line without the reason: %q", closed[0])
	}

	// the test process's heap agrees: about the budget, not peers x 1 MiB
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %.1f MiB", float64(grown)/(1<<20))
	if grown > int64(limit)+int64(peers)*lineBufSize+8<<20 {
		t.Fatalf("heap grew by %d bytes with %d peers holding unfinished lines; the budget is %d", grown, peers, limit)
	}

	// the good agent still works, and a 300 KiB holders report of its gets
	// room: the largest unfinished line is closed instead
	for i := int64(2); i <= 50; i++ {
		good.sendFrame(sample(0, t0+i*ms, uint64(i)))
	}
	waitFor(t, "the good agent's samples", func() bool { return st.Count(key) == 50 })
	rep := wire.Holders{Type: wire.TypeHolders, T: t0 + 51*ms, Groups: []wire.HolderGroup{{Kind: "variable", Name: strings.Repeat("n", 300<<10)}}}
	good.sendFrame(rep)
	waitFor(t, "the good agent's holders report", func() bool {
		a, _ := agentByPID(st, 500)
		return a.Holders != nil && a.Connected
	})
	if n := len(closedForBudget(srv)); n != len(closed)+1 {
		t.Errorf("%d peers closed after the holders report, want one more than %d", n, len(closed))
	}
	if used, _ := srv.lines.usage(); used > limit {
		t.Errorf("unfinished lines hold %d bytes, over the budget", used)
	}
}

func closedForBudget(srv *testServer) []string {
	var out []string
	for _, l := range srv.logs.all() {
		if strings.Contains(l, "budget") {
			out = append(out, l)
		}
	}
	return out
}

// allRead reports whether the server has n peers besides the good agent,
// each with an unfinished line of part bytes wholly buffered.
func allRead(srv *testServer, n, part int) bool {
	srv.mu.Lock()
	conns := len(srv.conns)
	srv.mu.Unlock()
	srv.lines.mu.Lock()
	defer srv.lines.mu.Unlock()
	if conns != n+1 || len(srv.lines.held) != n {
		return false
	}
	for _, h := range srv.lines.held {
		if h+lineBufSize < part {
			return false
		}
	}
	return true
}
