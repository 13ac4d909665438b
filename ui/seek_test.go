package ui

import (
	"testing"
	"time"
)

// Live, in the whole-run zoom, home shows the whole run (its first window
// is all of it) and → then ← move a tenth of the run; before, home read
// the window after pausing, from a cursor not yet set, and went to 1 s.
func TestLiveWholeRunHomeAndSeek(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 160, 50)
	start, now := st.Start(), fixtureNow.UnixNano()
	m.tl.zoom = len(zooms) - 1
	m = send(t, m, press("home")...)
	if !m.tl.paused || m.tl.cursor(now) != now {
		t.Fatalf("home: paused %v at %v, want paused at now (%v)", m.tl.paused, time.Duration(m.tl.cursor(now)-start), time.Duration(now-start))
	}
	m = send(t, m, press("left")...)
	if got, want := now-m.tl.cursor(now), (now-start)/10; got != want {
		t.Errorf("← moved %v, want a tenth of the run, %v", time.Duration(got), time.Duration(want))
	}
}
