package ui

import (
	"testing"
	"time"
)

func TestWindowIsAlignedToColumns(t *testing.T) {
	tl := newTimeline(false, at(0), at(90*time.Second))
	cols := 300
	now := at(90*time.Second + 50*time.Millisecond) // inside a 200 ms column
	from1, to1 := tl.window(now, at(0), cols)
	from2, to2 := tl.window(now+int64(time.Millisecond), at(0), cols)
	colW := int64(time.Minute) / int64(cols)
	if to1-from1 != colW*int64(cols) {
		t.Fatalf("window spans %v, want %v", time.Duration(to1-from1), time.Minute)
	}
	if to1%colW != 0 || from1%colW != 0 {
		t.Errorf("window edges are not on column boundaries: %d %d (column %d ns)", from1, to1, colW)
	}
	if from1 != from2 || to1 != to2 {
		t.Errorf("a millisecond later the window moved from %d..%d to %d..%d; it should stay within a column", from1, to1, from2, to2)
	}
	if to1 < now {
		t.Errorf("window ends at %d, before now", to1)
	}
}

func TestReplayCursorPlaysAtSpeedAndStopsAtEnd(t *testing.T) {
	start, last := at(0), at(90*time.Second)
	wall := time.Unix(1000, 0).UnixNano()
	tl := newTimeline(true, start, wall)
	tl.advance(wall+int64(2*time.Second), last)
	if got := time.Duration(tl.cursor(0) - start); got != 2*time.Second {
		t.Fatalf("at 1x, 2 s of wall time moved the cursor %v", got)
	}
	tl.faster()
	tl.faster() // 4x
	tl.advance(wall+int64(3*time.Second), last)
	if got := time.Duration(tl.cursor(0) - start); got != 6*time.Second {
		t.Fatalf("at 4x, 1 s more moved the cursor to %v, want 6s", got)
	}
	tl.advance(wall+int64(time.Hour), last)
	if tl.cursor(0) != last || !tl.paused {
		t.Fatalf("the cursor ran past the end (%v) or kept playing", time.Duration(tl.cursor(0)-start))
	}
	// space at the end starts over
	tl.togglePause(wall+int64(time.Hour), start, last)
	if tl.cursor(0) != start || tl.paused {
		t.Errorf("resume at the end should restart from the start")
	}
	for i := 0; i < 20; i++ {
		tl.slower()
		tl.zoomOut(time.Hour * 48)
	}
	if speeds[tl.speed] != 0.25 || zooms[tl.zoom] != 0 {
		t.Errorf("speed %v zoom %v: bounds not kept", speeds[tl.speed], zooms[tl.zoom])
	}
}

func TestLiveSeekPausesAndEndResumes(t *testing.T) {
	now := at(90 * time.Second)
	tl := newTimeline(false, at(0), now)
	tl.seek(-0.1, now, at(0), now)
	if !tl.paused {
		t.Fatal("scrolling back while live should pause")
	}
	if got := time.Duration(now - tl.cursor(now+int64(time.Second))); got != 6*time.Second {
		t.Errorf("back 10%% of a 1m window moved %v, want 6s (and a paused view must not follow the clock)", got)
	}
	tl.seek(+1, now, at(0), now)
	if tl.cursor(now) != now {
		t.Errorf("seeking forward past now should stop at now")
	}
	tl.toEnd(now, now)
	if tl.paused {
		t.Errorf("end should go back to live")
	}
}

func TestZoomSkipsWindowsLongerThanTheRun(t *testing.T) {
	tl := newTimeline(true, at(0), at(47*time.Second))
	run := 47 * time.Second
	tl.zoomOut(run) // from 1m: longer than the run, so the whole run
	if zooms[tl.zoom] != 0 {
		t.Fatalf("zoom %v, want the whole run", zooms[tl.zoom])
	}
	tl.zoomIn(run) // back to the longest window shorter than the run
	if zooms[tl.zoom] != 30*time.Second {
		t.Fatalf("zoom in from the whole run gave %v, want 30s", zooms[tl.zoom])
	}
	tl.zoomIn(run)
	if zooms[tl.zoom] != 10*time.Second {
		t.Fatalf("zoom in gave %v, want 10s", zooms[tl.zoom])
	}
	long := newTimeline(true, at(0), at(3*time.Hour))
	long.zoomOut(3 * time.Hour)
	if zooms[long.zoom] != 5*time.Minute {
		t.Fatalf("a long run steps through every window: got %v", zooms[long.zoom])
	}
}
