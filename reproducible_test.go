package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docBuild is docs/install.md's build command: `go build FLAGS -o gputop .`.
var docBuild = regexp.MustCompile("(?m)^CGO_ENABLED=1 go build ((?:-[^ ]+ )*)-o gputop \\.")

// TestReproducibleBuild builds the binary the way docs/install.md says, in two
// copies of the tree at different paths, and wants the same bytes: no
// checkout path in the Go or the C parts' debug info (go-nvml and
// sampler/native are cgo).
func TestReproducibleBuild(t *testing.T) {
	doc, err := os.ReadFile("docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	m := docBuild.FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md has no line `CGO_ENABLED=1 go build FLAGS -o gputop .`")
	}
	flags := strings.Fields(string(m[1]))
	wheels, err := os.ReadFile("scripts/build-wheels.sh")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := os.ReadFile("scripts/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]byte{m[0], wheels, demo} {
		if !bytes.Contains(s, []byte("go build -trimpath")) {
			t.Errorf("a build without -trimpath keeps the checkout's path in the binary: %.80q", s)
		}
	}

	files, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	tmp := t.TempDir()
	dirs := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "a-longer", "checkout", "path")}
	var sums [2][sha256.Size]byte
	for i, dir := range dirs {
		for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
			if fi, err := os.Lstat(f); err == nil && !fi.Mode().IsRegular() {
				continue // a link or a directory left untracked (a venv linked in): no source of the build
			}
			b, err := os.ReadFile(f)
			if os.IsNotExist(err) { // deleted in the work tree, not yet in git
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(tmp, "gputop"+string(rune('1'+i)))
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, ".")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s in %s: %v\n%s", strings.Join(flags, " "), dir, err, msg)
		}
		bin, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(bin, []byte(dir)) {
			t.Errorf("the binary built in %s holds that path", dir)
		}
		sums[i] = sha256.Sum256(bin)
		t.Logf("go build %s in %s: sha256 %x", strings.Join(flags, " "), dir, sums[i])
	}
	if sums[0] != sums[1] {
		t.Errorf("the two builds differ: %x and %x", sums[0], sums[1])
	}
}
