package agentlink

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Past MaxConns, a connection is answered with the reason and closed, the
// log says so with the count, and the agents held carry on; once one
// leaves, a new one is taken.
func TestConnectionsPastTheCapRefused(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, func(s *Server) { s.maxConns = 3 })
	held := make([]*peer, 3)
	for i := range held {
		held[i] = dial(t, srv.Path())
		held[i].sendFrame(hello(2001+i, wire.AgentDevice{Index: 0, UUID: uuidA}))
	}
	waitFor(t, "three agents", func() bool { return len(st.Agents()) == 3 })

	for n := 1; n <= 2; n++ {
		extra := dial(t, srv.Path())
		if r := extra.reply(); r.OK || !strings.Contains(r.Error, "gputop holds 3 connections, its limit") {
			t.Fatalf("refusal %d: reply %+v", n, r)
		}
		extra.closed()
	}
	if got := srv.Refused(); got != 2 {
		t.Errorf("Refused() = %d, want 2", got)
	}
	srv.logs.wait(t, "agent socket: refused a connection: it holds 3, its limit (1 refused so far)")

	held[0].sendFrame(sample(0, t0+ms, 5))
	waitFor(t, "a held agent's sample", func() bool {
		return st.Count(store.Key{Dev: 0, PID: 2001, Metric: store.Allocated}) == 1
	})
	held[1].sendFrame(wire.Bye{Type: wire.TypeBye, T: t0 + 2*ms})
	held[1].closed()
	waitFor(t, "the connection's end", func() bool { return srv.open.Load() == 2 })
	next := dial(t, srv.Path())
	next.sendFrame(hello(2010, wire.AgentDevice{Index: 0, UUID: uuidA}))
	waitFor(t, "the agent after one left", func() bool { _, ok := agentByPID(st, 2010); return ok })
}

// A hello no training process sends is refused where it enters, naming
// what is wrong: a pid above Linux's would take a remote host's key
// (store.HostPID); more devices than MaxHelloDevices, or a UUID longer than
// NVML's, would be kept for as long as the agent is.
func TestHelloBeyondAProcessRefused(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	many := make([]wire.AgentDevice, MaxHelloDevices+1)
	for i := range many {
		many[i] = wire.AgentDevice{Index: i, UUID: fmt.Sprintf("GPU-%d", i)}
	}
	for _, c := range []struct {
		h    wire.Hello
		want string
	}{
		{hello(store.HostPID(1, 1234)), `line 1: hello: "pid" 4195538 is not a Linux process id (at most 4194303)`},
		{hello(3001, many...), `line 1: hello: 65 "devices"; gputop takes at most 64 from one process`},
		{hello(3002, wire.AgentDevice{Index: 0, UUID: "GPU-" + strings.Repeat("a", 92)}),
			`line 1: hello: devices[0]: "uuid" is 96 bytes long; NVML's are shorter than 96`},
	} {
		p := dial(t, srv.Path())
		p.sendFrame(c.h)
		if r := p.reply(); r.Error != c.want {
			t.Errorf("reply %q, want %q", r.Error, c.want)
		}
		p.closed()
	}
	ok := dial(t, srv.Path())
	ok.sendFrame(hello(3003, many[:MaxHelloDevices]...))
	waitFor(t, "a hello at the limits", func() bool { _, ok := agentByPID(st, 3003); return ok })
	if n := len(st.Agents()); n != 1 {
		t.Errorf("%d agents kept, want only the one within the limits", n)
	}
}
