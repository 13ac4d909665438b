package ui

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
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
