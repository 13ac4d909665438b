package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeDemo is the README's demo command: the first line of the first sh
// block under "## Try it", less its comment.
func readmeDemo(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Try it\n")
	_, block, ok2 := strings.Cut(sec, "```sh\n")
	line, _, _ := strings.Cut(block, "\n")
	cmd, _, _ := strings.Cut(line, "#")
	if !ok || !ok2 || strings.TrimSpace(cmd) == "" {
		t.Fatal(`README.md has no "## Try it" section opening with an sh block: its first line is the demo command`)
	}
	return strings.TrimSpace(cmd)
}

// A newcomer's first run of the README's demo command, in a copy of the
// tree, in a terminal: it shows the demo, and once q has quit it, the
// terminal holds the command's one line and nothing of the build's (gcc's
// warnings from go-nvml's C part, Go's module downloads). The environment
// is a newcomer's: no CGO_CFLAGS of ours. A first build compiles the cgo
// packages; so that this one does with Go's build cache warm, CGO_CFLAGS
// carries a define no build has had (it is part of the cgo packages' cache
// key, and only they are compiled again).
func TestREADMEDemoCommandIsQuiet(t *testing.T) {
	demo := readmeDemo(t)
	clone := filepath.Join(t.TempDir(), "clone")
	files, err := exec.Command("git", "-C", "..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join("..", f)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link (a venv linked in): no source of the build
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(clone, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}

	first := fmt.Sprintf("-O2 -g -DGPUTOP_FIRST_BUILD_%d", time.Now().UnixNano())
	script := fmt.Sprintf("cd %q && %s; echo \"[exit $?]\"; exec sleep 3600", clone, demo)
	tm := startTermCmd(t, 120, 40, "env", "-u", "CGO_ENABLED", "CGO_CFLAGS="+first, "bash", "-c", script)
	deadline := time.Now().Add(5 * time.Minute) // the build: the cgo packages and a link
	for !strings.Contains(tm.screen(), "GPU 0") {
		if time.Now().After(deadline) || strings.Contains(tm.screen(), "[exit ") {
			t.Fatalf("the README's demo command %q never showed the demo:\n%s", demo, tm.all())
		}
		time.Sleep(200 * time.Millisecond)
	}
	tm.keys("q")
	deadline = time.Now().Add(15 * time.Second)
	for !strings.Contains(tm.all(), "[exit ") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	var got []string
	for _, l := range strings.Split(tm.all(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	want := regexp.MustCompile(`^building gputop into bin/ \(.*\)$`)
	if len(got) != 2 || !want.MatchString(got[0]) || got[1] != "[exit 0]" {
		t.Errorf("the README's demo command %q left %d lines on the terminal besides the demo; want one saying it builds, then the demo's exit 0. The first 20:\n%s",
			demo, len(got), strings.Join(got[:min(len(got), 20)], "\n"))
	}
}

// all is the pane's whole text, its scrollback included.
func (tm *term) all() string {
	out, _ := tm.tmux("capture-pane", "-p", "-S", "-", "-t", tm.name).Output()
	return string(out)
}
