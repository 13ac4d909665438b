package ui

import (
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// modeNames name each mode for the failures below.
var modeNames = map[keyMode]string{
	inScreen: "screen", inLabel: "label prompt", inRename: "rename prompt", inDelete: "delete prompt",
	inTiny: "tiny terminal", inOutput: "output pane", inOutputHidden: "folded output pane",
	inRunning: "running command", inLoading: "loading",
}

// modeName names a set of modes.
func modeName(mode keyMode) string {
	var ns []string
	for m, n := range modeNames {
		if mode&m != 0 {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return strings.Join(ns, " + ")
}

// The key table holds together: each entry has keys, a help and the
// handler its mode calls (the screen's model, or the output pane's); in
// each mode (and gputop run's pane with its command running), live and in
// replay, a key and a place in the key bar belong to one entry; and each
// docs/keys.md table's first entry has its line.
func TestKeyTableHoldsTogether(t *testing.T) {
	names := map[string]bool{}
	for _, a := range keyTable {
		if a.name == "" || names[a.name] {
			t.Errorf("entry %q: no name, or one used twice", a.name)
		}
		names[a.name] = true
		if len(a.keys) == 0 || a.help == "" || a.mode == 0 {
			t.Errorf("%s: keys %q, help %q, mode %b: each is needed", a.name, a.keys, a.help, a.mode)
		}
		screen, run, load := a.mode&^(inRun|inLoading) != 0, a.mode&inRun != 0, a.mode&inLoading != 0
		if n := btoi(screen) + btoi(run) + btoi(load); n != 1 {
			t.Errorf("%s: acts on %d kinds of model (the screen, the output pane, the loading screen); one is needed", a.name, n)
		}
		if (a.do != nil) != screen || (a.run != nil) != run {
			t.Errorf("%s: the screen's keys need do, the output pane's run, the loading screen's neither", a.name)
		}
	}
	var modes []keyMode
	for m := range modeNames {
		modes = append(modes, m)
	}
	modes = append(modes, inOutput|inRunning, inOutputHidden|inRunning) // what runModel.keyMode gives
	for _, mode := range modes {
		mname := modeName(mode)
		for _, replay := range []bool{false, true} {
			k := newKeyMap(replay)
			keyOwner, barOwner := map[string]string{}, map[int]string{}
			for _, a := range k.acts {
				if a.mode&mode == 0 {
					continue
				}
				for _, key := range a.keys {
					if o, ok := keyOwner[key]; ok {
						t.Errorf("%s (replay %v): %q is both %s's and %s's", mname, replay, key, o, a.name)
					}
					keyOwner[key] = a.name
				}
				if a.bar == 0 {
					continue
				}
				if o, ok := barOwner[a.bar]; ok {
					t.Errorf("%s (replay %v): place %d of the key bar is both %s's and %s's", mname, replay, a.bar, o, a.name)
				}
				barOwner[a.bar] = a.name
			}
		}
	}
	for _, s := range keySections {
		for _, a := range keyTable {
			if a.mode&s.modes != 0 {
				if a.doc == "" {
					t.Errorf("%s opens docs/keys.md's table %q, and has no line for it", a.name, s.lead)
				}
				break
			}
		}
	}
	var all keyMode
	for _, s := range keySections {
		all |= s.modes
	}
	for mode, mname := range modeNames {
		if mode&all == 0 {
			t.Errorf("mode %s has no table in docs/keys.md", mname)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The help lists the screen's keys in the table's order, the key bar
// takes them by their places, and what the bar drops at a narrow width is
// the last of them first: each drawn from the table.
func TestHelpAndKeyBarFollowTheTable(t *testing.T) {
	for _, replay := range []bool{false, true} {
		m := newModel(t, newFixture(), Options{Title: fixTitle, Replay: replay}, 160, 50)
		var want []string
		for _, a := range keyTable {
			if a.mode&inScreen != 0 && !(a.only == liveOnly && replay || a.only == replayOnly && !replay || a.live != "" && replay) {
				want = append(want, a.help)
			}
		}
		var got []string
		for _, b := range m.keys.FullHelp()[0] {
			got = append(got, b.Help().Desc)
		}
		if !slices.Equal(got, want) {
			t.Errorf("replay %v: help %q, want the table's %q", replay, got, want)
		}
		help := screen(send(t, m, press("?")...))
		for _, d := range want {
			if !strings.Contains(help, d) {
				t.Errorf("replay %v: the help lacks %q:\n%s", replay, d, help)
			}
		}

		var ranked []int
		for i, a := range m.keys.acts {
			if a.mode&inScreen != 0 && a.bar > 0 {
				ranked = append(ranked, i)
			}
		}
		slices.SortFunc(ranked, func(a, b int) int { return m.keys.acts[a].bar - m.keys.acts[b].bar })
		var items []string
		for _, i := range ranked {
			h := m.keys.bind[i].Help()
			items = append(items, h.Key+" "+h.Desc)
		}
		// at each width, the bar is the longest head of the ranked items
		// that fits, then help and quit
		for w := MinWidth; w <= 160; w += 7 {
			mw := newModel(t, newFixture(), Options{Title: fixTitle, Replay: replay}, w, 50)
			lines := strings.Split(screen(mw), "\n")
			bar := strings.TrimRight(lines[len(lines)-1], " ")
			n := 0
			for n < len(items) && ansi.StringWidth(strings.Join(append(slices.Clone(items[:n+1]), "? help", "q quit"), keySep)) <= w {
				n++
			}
			wantBar := strings.Join(append(slices.Clone(items[:n]), "? help", "q quit"), keySep)
			if bar != wantBar {
				t.Errorf("replay %v, %d columns: key bar %q, want %q", replay, w, bar, wantBar)
			}
		}
	}
}

// The prompt's key bar is the entries of its mode: a row being renamed
// or deleted says so at enter.
func TestPromptKeyBarFollowsItsMode(t *testing.T) {
	for _, c := range []struct {
		keys []string
		mode keyMode
		bar  string
	}{
		{[]string{"s"}, inLabel, "enter record • esc cancel • then ? help • q quit"},
		{[]string{"tab", "r"}, inRename, "enter rename • esc cancel • then ? help • q quit"},
		{[]string{"tab", "x"}, inDelete, "y/enter delete • n/esc keep • then ? help • q quit"},
	} {
		m := newModel(t, newFixture(), Options{Title: fixTitle}, 160, 50)
		mm := send(t, m, press(c.keys...)...)
		if got := mm.keyMode(); got != c.mode {
			t.Fatalf("after %q: mode %s, want %s", c.keys, modeName(got), modeName(c.mode))
		}
		lines := strings.Split(screen(mm), "\n")
		if bar := strings.TrimRight(lines[len(lines)-1], " "); bar != c.bar {
			t.Errorf("after %q: key bar %q, want %q", c.keys, bar, c.bar)
		}
		if mm = send(t, mm, press("esc")...); mm.keyMode() != inScreen {
			t.Errorf("after %q, esc: mode %s, want the screen", c.keys, modeName(mm.keyMode()))
		}
	}
}
