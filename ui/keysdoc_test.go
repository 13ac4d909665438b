package ui

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

var updateKeysDoc = flag.Bool("update-keys-doc", false, "rewrite docs/keys.md's key tables from the key table (keys.go)")

// docs/keys.md's key tables stand between these lines.
const (
	keysBegin = "<!-- keys: written from ui/keys.go by `go generate ./ui`; edit the table there -->"
	keysEnd   = "<!-- end of keys -->"
)

// keySections are docs/keys.md's key tables: where the keys act (the modes of
// the entries it lists), and the line that leads it.
var keySections = []struct {
	modes keyMode
	lead  string
}{
	{inScreen, "On the screen:"},
	{inPrompt, "In the label prompt (`s`, `c`) and the prompts of `r` and `x`; other keys are the label's text:"},
	{inRun, "Under `gputop run`, its output pane (these come first, except while a prompt is open):"},
	{inTiny, "While the terminal is smaller than 40×10 the screen only says so, and nothing else acts:"},
	{inLoading, "While a recording is being loaded:"},
}

// liveOnlyDoc ends the docs/keys.md line of each key that needs a live
// process (keyAction.live).
const liveOnlyDoc = "; live only: a replay's help (`?`) leaves it out, and pressed there it says it needs a live process and does nothing"

// keyNames are how docs/keys.md writes the arrow keys, which tea names by words.
var keyNames = map[string]string{"up": "↑", "down": "↓", "left": "←", "right": "→", "shift+up": "shift+↑", "shift+down": "shift+↓"}

// keyCell is an entry's keys for docs/keys.md: `↑`, `k`.
func keyCell(a keyAction) string {
	var ks []string
	for _, k := range a.keys {
		if n, ok := keyNames[k]; ok {
			k = n
		}
		ks = append(ks, "`"+k+"`")
	}
	return strings.Join(ks, ", ")
}

// keyTablesMarkdown is docs/keys.md's key tables: a line per doc, with the keys
// of the entries that share it, each listed once.
func keyTablesMarkdown() string {
	var b strings.Builder
	for i, s := range keySections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n\n| key | does |\n| --- | --- |\n", s.lead)
		var cells []string
		doc := ""
		flush := func() {
			if doc != "" {
				fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(cells, " / "), doc)
			}
			cells, doc = nil, ""
		}
		for _, a := range keyTable {
			if a.mode&s.modes == 0 {
				continue
			}
			if a.doc != "" {
				flush()
				doc = a.doc
				if a.live != "" {
					doc += liveOnlyDoc
				}
			}
			if c := keyCell(a); !slices.Contains(cells, c) {
				cells = append(cells, c)
			}
		}
		flush()
	}
	b.WriteString("\n") // the last table ends before the end line
	return b.String()
}

// docs/keys.md's key tables are the key table's (go generate ./ui rewrites
// them): a key added, moved or reworded in keys.go and not in the doc fails.
func TestKeysDocIsCurrent(t *testing.T) {
	const path = "../docs/keys.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i, j := strings.Index(readme, keysBegin), strings.Index(readme, keysEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no key tables between %q and %q", path, keysBegin, keysEnd)
	}
	head, got, tail := readme[:i+len(keysBegin)+1], readme[i+len(keysBegin)+1:j], readme[j:]
	want := keyTablesMarkdown()
	if got == want {
		return
	}
	if *updateKeysDoc {
		if err := os.WriteFile(path, []byte(head+want+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for k := 0; k < min(len(gl), len(wl)); k++ {
		if gl[k] != wl[k] {
			t.Fatalf("%s's key tables are stale (run go generate ./ui): line %d of them\ndoc: %q\nkeys.go: %q", path, k+1, gl[k], wl[k])
		}
	}
	t.Fatalf("%s's key tables are stale (run go generate ./ui): %d lines, keys.go makes %d", path, len(gl), len(wl))
}

// probes are the key presses a terminal can send that tea names: every
// printable ASCII character, the named keys, with shift and ctrl.
func probes() []tea.KeyPressMsg {
	var out []tea.KeyPressMsg
	for r := '!'; r <= '~'; r++ {
		out = append(out, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	for r := 'a'; r <= 'z'; r++ {
		out = append(out, tea.KeyPressMsg{Code: r, Mod: tea.ModCtrl})
	}
	out = append(out, tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	named := []rune{tea.KeyUp, tea.KeyDown, tea.KeyLeft, tea.KeyRight, tea.KeyHome, tea.KeyEnd, tea.KeyPgUp, tea.KeyPgDown,
		tea.KeyTab, tea.KeyEnter, tea.KeyEscape, tea.KeyBackspace, tea.KeyDelete, tea.KeyInsert}
	for f := tea.KeyF1; f <= tea.KeyF12; f++ {
		named = append(named, f)
	}
	for _, k := range named {
		for _, mod := range []tea.KeyMod{0, tea.ModShift, tea.ModCtrl, tea.ModAlt} {
			out = append(out, tea.KeyPressMsg{Code: k, Mod: mod})
		}
	}
	return out
}

// docKeyTables are docs/keys.md's key tables as the doc has them: for each
// of keySections, the keys its rows name, as tea names them ("up" for ↑).
func docKeyTables(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	_, text, _ := strings.Cut(string(b), keysBegin)
	text, _, _ = strings.Cut(text, keysEnd)
	teaName := map[string]string{}
	for k, n := range keyNames {
		teaName[n] = k
	}
	tables := make([][]string, len(keySections))
	at := -1
	for _, line := range strings.Split(text, "\n") {
		for i, s := range keySections {
			if line == s.lead {
				at = i
			}
		}
		cells := strings.Split(line, " | ")
		if at < 0 || !strings.HasPrefix(line, "| `") || len(cells) < 2 {
			continue
		}
		for _, k := range strings.FieldsFunc(strings.TrimPrefix(cells[0], "| "), func(r rune) bool { return r == ',' || r == '/' || r == ' ' }) {
			k = strings.Trim(k, "`")
			if n, ok := teaName[k]; ok {
				k = n
			}
			tables[at] = append(tables[at], k)
		}
	}
	return tables
}

// docs/keys.md's key tables against the bindings, pressed: each key a
// table names is one a terminal sends (tea names a press so) and, pressed
// where the table says, acts (live or in a replay); and each key press
// that acts in a table's modes is in that table. A key bound and not
// documented, documented and not bound, or documented under a name no
// press has, fails.
func TestKeysDocMatchesTheBindings(t *testing.T) {
	tables := docKeyTables(t)
	presses := map[string]tea.KeyPressMsg{}
	for _, p := range probes() {
		presses[p.String()] = p
	}
	maps := []*keyMap{newKeyMap(false), newKeyMap(true)}
	acts := func(modes keyMode, p tea.KeyPressMsg) bool {
		for bit := keyMode(1); bit != 0 && bit <= modes; bit <<= 1 {
			for _, k := range maps {
				if modes&bit != 0 && k.lookup(bit, p) != nil {
					return true
				}
			}
		}
		return false
	}
	for i, s := range keySections {
		if len(tables[i]) == 0 {
			t.Errorf("docs/keys.md has no keys under %q", s.lead)
		}
		for _, k := range tables[i] {
			p, ok := presses[k]
			switch {
			case !ok:
				t.Errorf("docs/keys.md, %q: %q is no key press a terminal sends (tea names none so)", s.lead, k)
			case !acts(s.modes, p):
				t.Errorf("docs/keys.md, %q: %q does nothing there", s.lead, k)
			}
		}
		for name, p := range presses {
			if acts(s.modes, p) && !slices.Contains(tables[i], name) {
				t.Errorf("%q acts %s, and docs/keys.md's table there (%q) does not list it", name, modeName(s.modes), s.lead)
			}
		}
	}
}
