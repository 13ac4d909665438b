package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// usageCommand is a usage line of gputop help ("  gputop record -o FILE …")
// or of a doc's command list ("gputop record -o FILE …"): its first word
// after gputop names the command ("record") or the TUI's way in ("[flags]",
// "--demo").
var usageCommand = regexp.MustCompile(`(?m)^(?:  )?gputop (\S+)`)

// helpCommands are the first words of gputop help's usage lines, in order.
func helpCommands(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(binary, "help").Output()
	if err != nil {
		t.Fatalf("gputop help: %v\n%s", err, out)
	}
	usage, _, _ := strings.Cut(string(out), "\nFlags:\n")
	var words []string
	for _, m := range usageCommand.FindAllStringSubmatch(usage, -1) {
		words = append(words, m[1])
	}
	if len(words) < 10 {
		t.Fatalf("gputop help lists %d commands:\n%s", len(words), out)
	}
	return words
}

// docSection is the text of a doc's section under heading, up to the next
// heading of its level.
func docSection(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", path, heading)
	}
	sec, _, _ = strings.Cut(sec, "\n"+strings.Fields(heading)[0]+" ")
	return sec
}

// The command lists of the README and docs/commands.md are gputop help's:
// the same commands, each way in, none missing and none more.
func TestDocsCommandsAreGputopHelps(t *testing.T) {
	want := helpCommands(t)
	slices.Sort(want)
	for _, path := range []string{"README.md", "docs/commands.md"} {
		sec := docSection(t, path, "## Commands")
		_, block, _ := strings.Cut(sec, "```\n")
		block, _, _ = strings.Cut(block, "```")
		var got []string
		for _, m := range usageCommand.FindAllStringSubmatch(block, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s's command list has no `gputop %s`, which gputop help lists", path, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("%s's command list has `gputop %s`, which gputop help does not list", path, g)
			}
		}
	}
}

// flagRow is a line of docs/commands.md's flag table: | `--name ARG` | commands | what |.
var flagRow = regexp.MustCompile("^\\| `(--?[a-z][a-z0-9.-]*(?: [A-Z]+)?)` \\| ([a-z, -]+) \\|")

// docs/commands.md's flag table is what each command's help prints, both
// ways: every flag gputop help COMMAND (gputop --help for the TUI) shows is
// in the table, written as the help writes it (`--rate HZ`), with that
// command among the row's commands; and every command a row names shows
// that flag.
func TestDocsFlagsAreEachCommandsHelp(t *testing.T) {
	helps := map[string][]string{} // command ("gputop": the TUI) -> its flags as "--name ARG"
	for _, c := range append([]string{"gputop"}, helpCommands(t)...) {
		if strings.HasPrefix(c, "-") || strings.HasPrefix(c, "[") || c == "help" {
			continue // the TUI's ways in are gputop's flags; help takes none
		}
		args := []string{"help", c}
		if c == "gputop" {
			args = []string{"--help"}
		}
		out, err := exec.Command(binary, args...).CombinedOutput() // gputop --help writes on stderr
		if err != nil {
			t.Fatalf("gputop %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		helps[c] = []string{}
		for _, l := range strings.Split(string(out), "\n") {
			if m := flagLine.FindStringSubmatch(l); m != nil {
				helps[c] = append(helps[c], strings.TrimSpace(m[1]+m[2]+" "+m[3]))
			}
		}
	}
	if len(helps["gputop"]) < 10 || len(helps["record"]) < 5 {
		t.Fatalf("read too few flags from the helps: %q", helps)
	}

	const path = "docs/commands.md"
	documented := map[string][]string{} // command -> its flags, as the table has them
	for _, l := range strings.Split(docSection(t, path, "## Flags"), "\n") {
		m := flagRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, c := range strings.Split(m[2], ", ") {
			if _, ok := helps[c]; !ok {
				t.Errorf("%s: %s is given to %q, which is no command of gputop help", path, m[1], c)
			}
			documented[c] = append(documented[c], m[1])
		}
	}
	for c, flags := range helps {
		name := "gputop " + c
		if c == "gputop" {
			name = "gputop" // the TUI
		}
		for _, f := range flags {
			if !slices.Contains(documented[c], f) {
				t.Errorf("%s --help shows %s, and %s's flag table has no row `%s` naming %s", name, f, path, f, c)
			}
		}
		for _, f := range documented[c] {
			if !slices.Contains(flags, f) {
				t.Errorf("%s's flag table gives `%s` to %s, and its help does not show it (it shows %q)", path, f, c, flags)
			}
		}
	}
}
