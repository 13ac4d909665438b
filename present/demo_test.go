package present

import (
	"bytes"
	"testing"

	"github.com/gputop/gputop/demo"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

func demoStore(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(store.DefaultOptions())
	if _, err := recording.LoadReader("demo", bytes.NewReader(demo.Recording), st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The demo's story moment has its last end row on screen with the process
// that took it, and is found from the rows, not a fixed time.
func TestDemoStoryMoment(t *testing.T) {
	st := demoStore(t)
	at, ok := StoryMoment(st)
	if !ok || at <= st.Start() || at > st.End() {
		t.Fatalf("moment %d in %d..%d", at, st.Start(), st.End())
	}
	p := NewPresenter()
	s := p.Screen(st, Query{Cursor: at, Replay: true, From: st.Start(), To: at + 1, Cols: 100})
	var last string
	for _, r := range s.Rows.Rows {
		if r.End {
			last = r.Label
		}
	}
	if last == "" {
		t.Fatalf("no end row visible at the story moment (%d rows)", len(s.Rows.Rows))
	}
	t.Logf("opens %.1f s into %.1f s, last end row %q, %d rows", float64(at-st.Start())/1e9, float64(st.End()-st.Start())/1e9, last, len(s.Rows.Rows))
}

// Nowhere in the demo does a process's NVML figure exceed the whole GPU's
// without saying it is the last one from before the process left.
func TestDemoProcessNeverAboveTheGPU(t *testing.T) {
	st := demoStore(t)
	p := NewPresenter()
	last := 0
	for c := st.Start(); c <= st.End(); c += int64(100e6) {
		s := p.Screen(st, Query{Cursor: c, Replay: true, From: c - 1e9, To: c + 1, Cols: 10})
		dev := s.Devices[0].Used
		for _, r := range s.Procs {
			if r.Used == nil || dev == nil {
				continue
			}
			if r.UsedLast {
				last++
				if r.NonTorch != nil {
					t.Errorf("at %d: a last figure should not give a non-torch figure", c-st.Start())
				}
				continue
			}
			if *r.Used > *dev {
				t.Fatalf("at %.1f s: pid %d NVML used %d above the GPU's %d, unlabelled", float64(c-st.Start())/1e9, r.PID, *r.Used, *dev)
			}
		}
	}
	t.Logf("%d moments showed a process's last figure", last)
}
