package ui

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// In a replay the keys that need a live process (s, c, M) add nothing and
// say why, and the key bar and the help leave them out; live, the help
// lists them and s still opens its prompt.
func TestLiveOnlyKeysRefuseInAReplay(t *testing.T) {
	st := newFixture()
	n := len(st.Rows())
	m := newModel(t, st, Options{Replay: true}, 160, 50)
	for _, k := range []string{"s", "c", "M"} {
		m = send(t, m, press(k)...)
		if m.prompt.open {
			t.Fatalf("%s opened a prompt in a replay:\n%s", k, screen(m))
		}
		m = send(t, m, press("enter")...)
		if got := len(st.Rows()); got != n {
			t.Fatalf("%s added %d rows in a replay", k, got-n)
		}
		if want := "a replay takes no"; !strings.Contains(m.status.text, want) || !strings.Contains(m.status.text, k+" asks") {
			t.Errorf("%s in a replay: status %q, want it to say why", k, m.status.text)
		}
	}
	if bar := screen(m); strings.Contains(bar, "s snapshot") {
		t.Errorf("the replay's key bar offers s:\n%s", bar)
	}
	live := newModel(t, newFixture(), Options{}, 160, 50)
	// the help (?): live it lists s, c and M; a replay's leaves them out
	for _, c := range []struct {
		m    Model
		want bool
	}{{live, true}, {m, false}} {
		help := ansi.Strip(send(t, c.m, press("?")...).helpText)
		for _, item := range []string{`\bs +snapshot`, `\bc +check: end row`, `\bM +dump memory`} {
			if regexp.MustCompile(item).MatchString(help) != c.want {
				t.Errorf("replay %v: the help lists %q: %v, want %v:\n%s", c.m.opt.Replay, item, !c.want, c.want, help)
			}
		}
	}
	live = send(t, live, press("s")...)
	if !live.prompt.open {
		t.Errorf("s live should open its prompt:\n%s", screen(live))
	}
}

// d and D with one GPU say there is one; [ and ] say the new speed while
// paused.
func TestOneGPUAndSpeedWhilePausedSaySo(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml", Rate: 998})
	m := newModel(t, st, Options{Replay: true}, 160, 50)
	for _, k := range []string{"d", "D"} {
		m = send(t, m, press(k)...)
		if !strings.Contains(m.status.text, "one GPU") || m.dev != 0 {
			t.Errorf("%s with one GPU: status %q, dev %d", k, m.status.text, m.dev)
		}
	}
	if !m.tl.paused {
		m = send(t, m, press("space")...)
	}
	m = send(t, m, press("]")...)
	if !strings.Contains(screen(m), "replay speed 2x (paused: space plays)") {
		t.Errorf("] while paused should say the new speed:\n%s", screen(m))
	}
	m = send(t, m, press("[", "[")...)
	if !strings.Contains(screen(m), "replay speed 0.5x") {
		t.Errorf("[ [ while paused should say the new speed:\n%s", screen(m))
	}
}

// The delete prompt takes y and n (other letters type nothing there).
func TestDeletePromptTakesYesNo(t *testing.T) {
	st := newFixture()
	m := newModel(t, st, Options{}, 160, 50)
	n := len(st.Rows())
	m = send(t, m, press("tab", "x")...)
	if !strings.Contains(screen(m), "y deletes it, n keeps it") {
		t.Fatalf("x should ask y/n:\n%s", screen(m))
	}
	m = send(t, m, press("a", "n")...)
	if m.prompt.open || len(st.Rows()) != n {
		t.Fatalf("n should keep the row and close the prompt: open %v, rows %d of %d", m.prompt.open, len(st.Rows()), n)
	}
	m = send(t, m, press("x", "y")...)
	if m.prompt.open || len(st.Rows()) != n-1 {
		t.Fatalf("y should delete the row: open %v, rows %d of %d\n%s", m.prompt.open, len(st.Rows()), n, screen(m))
	}
}

// e names the file it wrote by its absolute path.
func TestExportSaysTheAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var wrote string
	m := newModel(t, newFixture(), Options{CSVPath: "out.csv", WriteCSV: func(p string) error { wrote = p; return nil }}, 160, 50)
	m = send(t, m, press("e")...)
	want := filepath.Join(dir, "out.csv")
	if wrote != "out.csv" || !strings.Contains(m.status.text, "wrote "+want) {
		t.Errorf("e wrote %q, status %q; want out.csv, named %s", wrote, m.status.text, want)
	}
}

// A replay's key bar leads with space (play/pause), at every width.
func TestReplayKeyBarLeadsWithSpace(t *testing.T) {
	for _, w := range []int{MinWidth, 80, 160} {
		m := newModel(t, newFixture(), Options{Title: fixTitle, Replay: true}, w, 24)
		lines := strings.Split(screen(m), "\n")
		if bar := lines[len(lines)-1]; !strings.HasPrefix(bar, "space play/pause") {
			t.Errorf("%d columns: the replay's key bar %q", w, bar)
		}
	}
}

// h in a replay shows the holders report nearest before the cursor, its
// age measured from the cursor, not the wall clock.
func TestReplayHoldersAtTheCursor(t *testing.T) {
	st := newFixture() // a report at 67 s holding 1.25 GiB
	st.AgentHolders(fixPID, wire.Holders{Type: wire.TypeHolders, T: at(80 * time.Second), ID: 2, Dev: 0, Total: 64 * mib,
		Groups: []wire.HolderGroup{{Kind: "other", Name: "cache", Bytes: 64 * mib, Tensors: 1}}})
	for _, c := range []struct {
		cursor time.Duration
		want   string
	}{
		{70 * time.Second, "1.25 GiB in 3 groups, 2 objects skipped, 3s before the cursor"},
		{85500 * time.Millisecond, "64.0 MiB in 1 group, 0 objects skipped, 5.5s before the cursor"},
		{60 * time.Second, "no holders report in this recording up to the cursor"},
	} {
		m := newModel(t, st, Options{Replay: true, OpenAt: at(c.cursor)}, 160, 50)
		m = send(t, m, press("h")...)
		if got := ansi.Strip(m.holders.View()); !strings.Contains(got, c.want) {
			t.Errorf("cursor at %s: holders pane\n%s\nwant %q", c.cursor, got, c.want)
		}
	}
}

// A recording shorter than the default window opens on its whole run,
// paused at its end; a longer one plays from the start in the default one.
func TestShortRecordingOpensOnItsWholeRun(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	in.Device(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	for i := 0; i <= 57; i++ {
		in.NVML(0, t0+int64(i)*int64(100*time.Millisecond), uint64(i)*gib/10, 0)
	}
	m := newModelIn(t, in, Options{Replay: true}, 160, 50)
	if zooms[m.tl.zoom] != 0 || !m.tl.paused || m.tl.end != in.Store().End() {
		t.Errorf("a 5.7 s recording opens in window %s, paused %v, cursor at %d of %d; want the whole run, paused at its end",
			zoomName(zooms[m.tl.zoom]), m.tl.paused, m.tl.end-t0, in.Store().End()-t0)
	}
	long := newModel(t, newFixture(), Options{Replay: true}, 160, 50) // 90 s
	if long.tl.zoom != defaultZoom || long.tl.paused {
		t.Errorf("a 90 s recording opens in window %s, paused %v; want %s, playing", zoomName(zooms[long.tl.zoom]), long.tl.paused, zoomName(zooms[defaultZoom]))
	}
}
