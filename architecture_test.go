package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// packagesSection is ARCHITECTURE.md's "## Packages": the one list of what
// each package and top-level directory holds.
func packagesSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Packages\n")
	if start < 0 {
		t.Fatal("ARCHITECTURE.md has no ## Packages section")
	}
	text = text[start+len("\n## Packages\n"):]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	return text
}

// TestArchitectureNamesEveryPackage holds ARCHITECTURE.md's package list to
// `go list` and to the repository's top-level directories: a package or a
// directory it does not name fails, so the list cannot drift.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(packagesSection(t), -1) {
		named[m[1]] = true
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/gputop/gputop"
	pkgs := 0
	for _, path := range strings.Fields(string(out)) {
		pkg := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
		if pkg == "" {
			continue // the root is the table's `main` row
		}
		pkgs++
		if !named[pkg] {
			t.Errorf("ARCHITECTURE.md's package list does not name %s", pkg)
		}
	}
	if pkgs < 20 {
		t.Errorf("go list gave %d packages; want the module's 20 or more", pkgs)
	}
	files, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dirs := map[string]bool{}
	for _, f := range strings.Split(string(files), "\n") {
		if dir, _, ok := strings.Cut(f, "/"); ok && !strings.HasPrefix(dir, ".") {
			dirs[dir] = true
		}
	}
	for dir := range dirs {
		if !named[dir] {
			t.Errorf("ARCHITECTURE.md's package list does not name the directory %s", dir)
		}
	}
}
