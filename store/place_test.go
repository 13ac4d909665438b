package store

import (
	"testing"

	"github.com/gputop/gputop/wire"
)

// A hello's bad rank is left out, and the log says so; the process is
// watched all the same, with the fields that were good.
func TestAgentHelloWithABadRank(t *testing.T) {
	var logs []string
	st := New(Options{RawCapacity: 100, Log: func(l string) { logs = append(logs, l) }})
	st.AgentHello(wire.Hello{PID: 9, T: 1, Rank: "x7", LocalRank: "2", WorldSize: "8", Job: "j1", Devices: []wire.AgentDevice{}})
	ag := st.Agents()
	if len(ag) != 1 || !ag[0].Connected {
		t.Fatalf("agents %+v", ag)
	}
	if want := (wire.Place{Rank: -1, LocalRank: 2, WorldSize: 8, Job: "j1"}); ag[0].Place != want {
		t.Errorf("place %+v, want %+v", ag[0].Place, want)
	}
	if ag[0].Hello.Rank != "" {
		t.Errorf("the bad rank was kept in the hello: %q", ag[0].Hello.Rank)
	}
	if len(logs) != 1 || logs[0] != `pid 9: hello: "rank" (RANK) is "x7", not a whole number; left out` {
		t.Errorf("logs %q", logs)
	}
}
