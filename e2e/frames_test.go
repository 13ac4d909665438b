package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
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

// flatAgent is a training process on the real socket whose memory stays
// where it is: a minute of samples back-dated (the chart's window is full
// of them from the start), then the same figure ten times a second, as the
// agent sends them, until stop is closed.
func flatAgent(t *testing.T, sock string, stop <-chan struct{}) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(c)
	now := time.Now()
	send := func(f any) {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	send(wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: os.Getpid(), Argv: []string{"train.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-e2e-flat", Name: "E2E GPU", Total: 80 << 30}}, T: now.Add(-70 * time.Second).UnixNano()})
	sample := func(t time.Time) wire.Sample {
		return wire.Sample{Type: wire.TypeSample, T: t.UnixNano(), Dev: 0, Allocated: 20 << 30, Reserved: 24 << 30, Peak: 22 << 30}
	}
	for at := now.Add(-70 * time.Second); at.Before(now); at = at.Add(100 * time.Millisecond) {
		send(sample(at))
	}
	go func() {
		defer c.Close()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case at := <-tk.C:
				// an agent cut off changes the screen: the frames say so
				if enc.Encode(sample(at)) != nil {
					return
				}
			}
		}
	}()
}

// A live screen whose figures stay where they are is not drawn again: new
// samples of the same figure, the window sliding over them and the clock
// change nothing a person reads (the title's clock in seconds drew the
// whole screen once a second).
func TestFlatLiveScreenDrawsNothing(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gputop.sock")
	stats := filepath.Join(t.TempDir(), "frames")
	tm := startTermCmd(t, 160, 50, "env", "GPUTOP_FRAMESTATS="+stats, binary, "--source", "agent", "--socket", sock)
	waitFile(t, sock)
	stop := make(chan struct{})
	flatAgent(t, sock, stop)
	tm.waitFor("train.py")
	const quiet = 12 * time.Second
	time.Sleep(quiet)
	close(stop)
	tm.keys("q")
	tm.waitExit()
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatalf("no frame counts written: %v", err)
	}
	var ticks, frames int
	if _, err := fmt.Sscanf(string(b), "ticks %d\nframes %d\n", &ticks, &frames); err != nil {
		t.Fatalf("frame counts %q: %v", b, err)
	}
	t.Logf("%d ticks, %d frames", ticks, frames)
	if ticks < int(quiet.Seconds())*3 {
		t.Fatalf("%d ticks in %v: the screen was not looked at", ticks, quiet)
	}
	// the frames of the start, of the agent's arrival and of q; none in
	// the quiet seconds
	if frames > 12 {
		t.Errorf("%d frames drawn for a screen whose figures stayed still for %v; want only those of the start and of q", frames, quiet)
	}
}
