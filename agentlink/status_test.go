package agentlink

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// gputop status through the real socket: the report the server's Status
// makes, with the socket's path, comes back whole; the connection is
// closed after it, and a status frame after a hello is refused.
func TestStatusRoundTrip(t *testing.T) {
	v := uint64(3 << 20)
	srv := startServer(t, newStore(t, true), func(s *Server) {
		s.statusOf = func() wire.StatusReport {
			return wire.StatusReport{Version: wire.StatusVersion, Source: wire.StatusFromGputop, T: 7,
				Devices: []wire.StatusDevice{{Index: 1, Name: "NVIDIA H200", From: "nvml", Used: &v}}}
		}
	})
	r, err := Status(srv.Path(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "gputop" || r.Socket != srv.Path() || len(r.Devices) != 1 || r.Devices[0].Used == nil || *r.Devices[0].Used != v {
		t.Fatalf("report %+v", r)
	}

	p := dial(t, srv.Path())
	p.sendFrame(wire.Status{Type: wire.TypeStatus, V: wire.Version})
	if rep := p.reply(); !rep.OK || rep.Status == nil {
		t.Fatalf("reply %+v", rep)
	}
	p.closed()

	p = dial(t, srv.Path())
	h := hello(1601, wire.AgentDevice{Index: 0, UUID: uuidB})
	h.T = testNow().UnixNano()
	p.sendFrame(h)
	p.sendFrame(wire.Status{Type: wire.TypeStatus, V: wire.Version})
	if rep := p.reply(); rep.OK || !strings.Contains(rep.Error, `"status" must be the first and only frame`) {
		t.Fatalf("reply %+v", rep)
	}
}

// A server without a report maker says so; none listening is
// ErrNotRunning, which gputop status falls back from.
func TestStatusRefusedAndNotRunning(t *testing.T) {
	srv := startServer(t, newStore(t, true), nil)
	if _, err := Status(srv.Path(), 5*time.Second); err == nil || !strings.Contains(err.Error(), "makes no status report") {
		t.Fatalf("err %v", err)
	}
	_, err := Status(filepath.Join(t.TempDir(), "none.sock"), time.Second)
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("err %v", err)
	}
}

// A report larger than wire.MaxStatusBytes is refused whole by the
// server, and logged: never cut.
func TestStatusOverTheBoundRefused(t *testing.T) {
	srv := startServer(t, newStore(t, true), func(s *Server) {
		s.statusOf = func() wire.StatusReport {
			return wire.StatusReport{Version: wire.StatusVersion, DevicesWhy: strings.Repeat("x", wire.MaxStatusBytes)}
		}
	})
	_, err := Status(srv.Path(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "over the 8388608-byte limit") {
		t.Fatalf("err %v", err)
	}
	srv.logs.wait(t, "gputop status refused: the status report is")
}

// The client reads at most wire.MaxStatusBytes of answer, where it
// enters: a peer that sends more gets an error, not an unbounded buffer.
func TestStatusClientBoundsTheAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 512))
		chunk := []byte(`{"type":"reply","ok":true,"error":"` + strings.Repeat("y", 1<<16))
		for range wire.MaxStatusBytes/len(chunk) + 2 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_, err = Status(path, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "longer than 8388608 bytes") {
		t.Fatalf("err %v", err)
	}
}

// Many gputop status at once: each gets its report, and the server makes
// one at a time (one report's memory, however many ask).
func TestStatusOneReportAtATime(t *testing.T) {
	var inFlight, most atomic.Int32
	srv := startServer(t, newStore(t, true), func(s *Server) {
		s.statusOf = func() wire.StatusReport {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond) // long enough for the others to arrive meanwhile
			return wire.StatusReport{Version: wire.StatusVersion, Source: wire.StatusFromGputop}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Status(srv.Path(), 10*time.Second); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d reports were made at once", m)
	}
}
