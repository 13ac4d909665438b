package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
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

// glossaryTerms are the terms ARCHITECTURE.md's "## Glossary" defines, one
// name per concept for the code, the docs and the UI.
var glossaryTerms = []string{"row", "summary", "snapshot", "mark", "marker", "end row", "verdict", "dump", "presenter"}

// retired are words the glossary replaced, with the word to use instead.
// A match preceded by one of unless is allowed ("torch's memory
// snapshot" names torch's thing, "After cleanup row" a row by its label).
var retired = []struct {
	re     *regexp.Regexp
	unless []string
	use    string
}{
	{re: regexp.MustCompile(`(?i)\bsnapshot rows?\b`), use: "row"},
	{re: regexp.MustCompile(`(?i)\bsnapshots? (table|pane)\b`), use: "the summary (pane)"},
	{re: regexp.MustCompile(`(?i)\bhide snapshots\b`), use: "hide summary"},
	{re: regexp.MustCompile(`(?i)\bmemory snapshots?\b`), unless: []string{"torch's "}, use: "dump"},
	{re: regexp.MustCompile(`(?i)\btorch snapshots?\b`), use: "dump"},
	{re: regexp.MustCompile(`(?i)\bcleanup rows?\b`), unless: []string{"after ", "before "}, use: "end row"},
	{re: regexp.MustCompile(`(?i)\bfinal rows?\b`), use: "end row"},
	{re: regexp.MustCompile(`(?i)\bjudge?ments?\b`), use: "verdict"},
}

// retiredIn lists each retired word in text, whose first line is line
// first of file, as "file:line: word (use ...)".
func retiredIn(file string, first int, text string) []string {
	var found []string
	for _, r := range retired {
		for _, m := range r.re.FindAllStringIndex(text, -1) {
			before := strings.ToLower(text[max(0, m[0]-16):m[0]])
			ok := false
			for _, u := range r.unless {
				ok = ok || strings.HasSuffix(before, u)
			}
			if !ok {
				line := first + strings.Count(text[:m[0]], "\n")
				found = append(found, fmt.Sprintf("%s:%d: %q (use %q)", file, line, text[m[0]:m[1]], r.use))
			}
		}
	}
	return found
}

// TestGlossary holds the vocabulary: ARCHITECTURE.md's glossary defines
// every term, and no retired synonym is back in a Go string (what the UI,
// the logs and the errors say) or in the docs.
func TestGlossary(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Glossary\n")
	if start < 0 {
		t.Fatal("ARCHITECTURE.md has no ## Glossary section")
	}
	gloss := text[start+len("\n## Glossary\n"):]
	if end := strings.Index(gloss, "\n## "); end >= 0 {
		gloss = gloss[:end]
	}
	for _, term := range glossaryTerms {
		if !strings.Contains(gloss, "\n- **"+term+"**: ") {
			t.Errorf("ARCHITECTURE.md's glossary has no entry \"- **%s**: ...\"", term)
		}
	}

	var found []string
	docs := []string{"README.md", "ARCHITECTURE.md", "recording/FORMAT.md", "agent/README.md", "testdata/protocol/README.md", "bench/README.md"}
	more, _ := filepath.Glob("docs/*.md")
	for _, path := range append(docs, more...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		found = append(found, retiredIn(path, 1, text)...)
	}
	files, err := exec.Command("git", "ls-files", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	fset := token.NewFileSet()
	for _, path := range strings.Fields(string(files)) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				found = append(found, retiredIn(path, fset.Position(lit.Pos()).Line, lit.Value)...)
			}
			return true
		})
	}
	for _, f := range found {
		t.Errorf("a retired word: %s (ARCHITECTURE.md's glossary)", f)
	}
}
