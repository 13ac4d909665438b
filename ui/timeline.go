package ui

import (
	"time"
)

// zooms are the window lengths + and - step through; 0 is the whole run.
var zooms = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 0}

// speeds are the replay play speeds.
var speeds = []float64{0.25, 0.5, 1, 2, 4, 8, 16}

const defaultZoom = 2 // 1m
const defaultSpeed = 2

// timeline decides which time span the chart shows: live (the window ends
// now), live paused (frozen end, scrollable) or replay (a cursor that plays
// at a chosen speed).
type timeline struct {
	replay bool
	zoom   int
	speed  int
	paused bool
	end    int64 // frozen end (live, paused) or the replay cursor
	wall   int64 // wall clock at the last replay advance
}

func newTimeline(replay bool, start int64, now int64) timeline {
	t := timeline{replay: replay, zoom: defaultZoom, speed: defaultSpeed}
	if replay {
		t.end, t.wall = start, now
	}
	return t
}

// openAt puts the replay cursor at t, paused, the whole run in the window.
func (t *timeline) openAt(at int64) {
	t.end, t.paused, t.zoom = at, true, len(zooms)-1
}

// cursor is the instant the screen describes: now when live, else the
// frozen end or the replay cursor.
func (t *timeline) cursor(now int64) int64 {
	if !t.replay && !t.paused {
		return now
	}
	return t.end
}

// advance moves the replay cursor by the wall time since the last call
// times the speed, stopping at the recording's end.
func (t *timeline) advance(now, last int64) {
	if !t.replay {
		return
	}
	if !t.paused {
		d := float64(now-t.wall) * speeds[t.speed]
		t.end += int64(d)
		if t.end >= last {
			t.end, t.paused = last, true
		}
	}
	t.wall = now
}

// togglePause freezes or resumes; a replay at its end restarts from the start.
func (t *timeline) togglePause(now, start, last int64) {
	if t.paused {
		t.paused = false
		t.wall = now
		if t.replay && t.end >= last {
			t.end = start
		}
		return
	}
	t.end = t.cursor(now)
	t.paused = true
}

// windowLen is the current window length; the whole run spans start..cursor.
func (t *timeline) windowLen(now, start int64) time.Duration {
	if z := zooms[t.zoom]; z != 0 {
		return z
	}
	d := time.Duration(t.cursor(now) - start)
	if d < time.Second {
		d = time.Second
	}
	return d
}

// seek moves the cursor by frac of the window (negative: back; the whole
// run in the whole-run zoom, see seekWindow). Live, it pauses first, so scrolling back through history never jumps to now.
func (t *timeline) seek(frac float64, now, start, last int64) {
	w := t.seekWindow(now, start, last)
	if !t.replay && !t.paused {
		t.end, t.paused = now, true
	}
	t.end += int64(frac * float64(w))
	hi := last
	if !t.replay {
		hi = now
	}
	t.clamp(start, hi)
}

func (t *timeline) clamp(lo, hi int64) {
	if t.end > hi {
		t.end = hi
	}
	if t.end < lo {
		t.end = lo
	}
}

// home goes to the start of the run (the first window of it, when live).
func (t *timeline) home(now, start, last int64) {
	if t.replay {
		t.end = start
		return
	}
	w := t.windowLen(now, start) // before pausing: the window of now
	t.paused = true
	t.end = start + int64(w)
	t.clamp(start, now)
}

// toEnd goes to the end of a recording, or back to live.
func (t *timeline) toEnd(now, last int64) {
	if t.replay {
		t.end, t.paused = last, true
		return
	}
	t.paused = false
}

// zoomIn narrows the window. From the whole run it goes to the longest
// window shorter than the run, so the first step always changes the picture.
func (t *timeline) zoomIn(run time.Duration) {
	if zooms[t.zoom] != 0 {
		t.zoom = max(t.zoom-1, 0)
		return
	}
	t.zoom = 0
	for t.zoom+1 < len(zooms)-1 && zooms[t.zoom+1] < run {
		t.zoom++
	}
}

// zoomOut widens the window; a window far longer than the run so far would
// be mostly empty space, so it goes to the whole run instead.
func (t *timeline) zoomOut(run time.Duration) {
	t.zoom = min(t.zoom+1, len(zooms)-1)
	if z := zooms[t.zoom]; z != 0 && run > 0 && z > run+run/2 {
		t.zoom = len(zooms) - 1
	}
}
func (t *timeline) slower() { t.speed = max(t.speed-1, 0) }
func (t *timeline) faster() { t.speed = min(t.speed+1, len(speeds)-1) }

// window returns the chart span [from, to) for cols columns. The right edge
// is the end of the column holding the cursor, so the cursor's instant is
// inside the window, and columns stay aligned to fixed times:
// old columns then aggregate the same samples frame after frame and the
// picture does not shimmer (and an unchanged picture need not be redrawn).
func (t *timeline) window(now, start int64, cols int) (from, to int64) {
	end := t.cursor(now)
	if cols < 1 {
		cols = 1
	}
	if zooms[t.zoom] == 0 {
		// whole run: fixed left edge at the start
		span := end - start
		if span < int64(time.Second) {
			span = int64(time.Second)
		}
		colW := span/int64(cols) + 1 // > span/cols: the cursor's instant is inside
		return start, start + colW*int64(cols)
	}
	w := int64(zooms[t.zoom])
	colW := w / int64(cols)
	if colW < 1 {
		colW = 1
	}
	to = end - end%colW + colW
	return to - colW*int64(cols), to
}
