package forecast

import (
	"testing"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

// BenchmarkFor is one forecast of a process with a step row every second
// for 10,000 steps (the store's 50,000 rows shared with four more such
// processes), as the TUI, the alert watcher and each scrape ask once a
// second per process.
func BenchmarkFor(b *testing.B) {
	in := ingest.New(store.New(store.DefaultOptions()))
	var runs []*run
	for pid := 5000; pid < 5005; pid++ {
		runs = append(runs, newRun(in, pid, 80<<30, 2<<30, mib, 1<<30))
	}
	for range 10_000 {
		for _, r := range runs {
			r.steps(1)
		}
	}
	st := in.Store()
	var a *store.Agent
	for _, x := range st.Agents() {
		if x.Hello.PID == 5000 {
			a = &x
		}
	}
	b.ResetTimer()
	for range b.N {
		if f := For(st, a, 0, at(10_000), true); f.Status != OOM {
			b.Fatal(f.Text())
		}
	}
}
