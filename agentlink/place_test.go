package agentlink

import (
	"slices"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// hello_rank.ndjson's place reaches the store; hello_rank_bad.ndjson's
// agent is kept, its bad fields left out and the log naming each.
func TestRankVectorsInStore(t *testing.T) {
	notes := &logRec{} // the store's notes
	st := store.New(store.Options{RawCapacity: 1000, Log: notes.add})
	srv := startServer(t, st, nil)
	good := dial(t, srv.Path())
	good.send(vectorLines(t, "hello_rank.ndjson")...)
	bad := dial(t, srv.Path())
	bad.send(vectorLines(t, "hello_rank_bad.ndjson")...)
	srv.logs.wait(t, "pid 4244")
	waitFor(t, "both hellos", func() bool {
		_, a := agentByPID(st, 4242)
		_, b := agentByPID(st, 4244)
		return a && b
	})
	a, _ := agentByPID(st, 4242)
	if want := (wire.Place{Rank: 3, LocalRank: 1, WorldSize: 8, Job: "tr-5f3a"}); a.Place != want {
		t.Errorf("pid 4242: place %+v, want %+v", a.Place, want)
	}
	b, _ := agentByPID(st, 4244)
	if want := (wire.Place{Rank: -1, LocalRank: -1, WorldSize: 8}); b.Place != want || !b.Connected {
		t.Errorf("pid 4244: place %+v connected %v, want %+v and connected", b.Place, b.Connected, want)
	}
	logs := notes.all()
	for _, want := range []string{
		`pid 4244: hello: "rank" (RANK) is "three", not a whole number; left out`,
		`pid 4244: hello: "local_rank" 9 is not below "world_size" 8; left out`,
	} {
		if !slices.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%q", want, logs)
		}
	}
}
