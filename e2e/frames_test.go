package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// frameStats runs the demo at 160x50 with GPUTOP_FRAMESTATS set, presses
// keys once its screen is up, waits for, quits, and returns how many ticks
// the TUI handled and frames it drew, and how long it ran.
func frameStats(t *testing.T, keys []string, wait time.Duration) (ticks, frames int, ran time.Duration) {
	t.Helper()
	stats := filepath.Join(t.TempDir(), "frames")
	start := time.Now()
	tm := startTermCmd(t, 160, 50, "env", "GPUTOP_FRAMESTATS="+stats, binary, "--demo")
	tm.waitFor("replay ❚❚ paused")
	if len(keys) > 0 {
		tm.keys(keys...)
	}
	time.Sleep(wait)
	tm.keys("q")
	tm.waitExit()
	ran = time.Since(start)
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatalf("no frame counts written: %v", err)
	}
	if _, err := fmt.Sscanf(string(b), "ticks %d\nframes %d\n", &ticks, &frames); err != nil {
		t.Fatalf("frame counts %q: %v", b, err)
	}
	return ticks, frames, ran
}

// A paused replay changes only when a key is pressed: the TUI looks at it
// once a second and draws nothing new (it ticked 30 times a second).
func TestPausedReplayDrawsNothing(t *testing.T) {
	ticks, frames, ran := frameStats(t, nil, 4*time.Second)
	if max := int(ran.Seconds()) + 2; ticks > max {
		t.Errorf("%d ticks in %v paused; want at most %d (one a second)", ticks, ran, max)
	}
	// the frames of the start (the window's size, the terminal's answers)
	// and of q; none from the clock
	if frames > 8 {
		t.Errorf("%d frames drawn in %v paused; want only those of the start and of q", frames, ran)
	}
}

// A replay playing is drawn at most 4 times a second (its clock, in
// tenths, was drawn 10 times a second).
func TestPlayingReplayDrawsFourTimesASecond(t *testing.T) {
	ticks, frames, ran := frameStats(t, []string{"Home", "Space"}, 4*time.Second)
	max := int(4*ran.Seconds()) + 8 // and those of the start and the keys
	if ticks > max || frames > max {
		t.Errorf("%d ticks and %d frames in %v playing; want at most %d (4 a second)", ticks, frames, ran, max)
	}
	if frames < 8 {
		t.Errorf("%d frames in %v playing: the replay was not drawn as it played", frames, ran)
	}
}
