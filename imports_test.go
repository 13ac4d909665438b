package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// mayImport is ARCHITECTURE.md's "Who may import whom" as data: for each
// package of this module, the packages of this module it may import. The
// root (package main, the command line) may import anything and is not
// listed. A
// package missing here fails the test, so a new package comes with its rule.
var mayImport = map[string][]string{
	"wire":                      {},
	"printable":                 {},
	"units":                     {},
	"outfile":                   {},
	"demo":                      {},
	"sampler/native":            {},
	"sampler/native/nativetest": {"sampler/native"},
	"logbook":                   {"printable"},
	"store":                     {"wire", "printable"},
	"ingest":                    {"store", "wire"},
	"memdump":                   {"printable", "units"},
	"runner":                    {"printable"},
	"fit":                       {"wire", "printable", "units"},
	// readers of the store: they never write it (ingest/onlyway_test.go)
	"summary": {"store", "wire", "units", "outfile"},
	"present": {"store", "wire", "summary", "forecast"},
	"metrics": {"store", "wire", "forecast"},
	"status":  {"store", "summary", "wire", "printable", "units"},
	// a process's forecast: reads the store, like summary
	"forecast": {"store", "wire", "units"},
	// --alert: reads the store and runs the user's command
	"alert": {"forecast", "store", "summary", "units", "wire"},
	// sources: they write through ingest and never import ui, present or summary
	"sampler":   {"ingest", "store", "wire", "sampler/native"},
	"agentlink": {"ingest", "store", "wire", "printable"},
	"recording": {"ingest", "store", "wire"},
	"remote":    {"ingest", "recording", "store", "wire", "units"},
	// a live session assembled: the store, its ingest, the recorder, the
	// sources and the metrics endpoint, wired once for every command
	"session": {"agentlink", "alert", "ingest", "logbook", "metrics", "outfile", "recording", "remote", "sampler", "status", "store", "wire"},
	// the UI: reads through present and summary, writes through ingest, never a source
	"ui": {"present", "summary", "forecast", "store", "ingest", "wire", "memdump", "printable", "units", "logbook"},
	// the benchmarks drive the store and the ingest directly
	"bench":              {"ingest", "store"},
	"bench/cmd/soak":     {"bench", "store"},
	"bench/cmd/wakeloop": {},
	"bench/cmd/tuiload":  {"ingest", "sampler", "session", "store", "ui", "wire"},
	// a recording's forecasts replayed at each step row
	"bench/cmd/forecastcheck": {"forecast", "recording", "store", "wire"},
	"bench/cmd/peakcheck":     {"recording", "store", "summary"},
	// the real binary measured as a command
	"bench/cmd/metricslimits": {"internal/scrapeconn"},
	// the real binary driven as a command and in tmux: it imports nothing of
	// gputop's (its tests: the internal/ helpers)
	"e2e": {},
	// tests' helpers: a certificate for HTTPS (imported by tests only), one
	// scrape on a connection left open (e2e's test and metricslimits)
	"internal/testcert":   {},
	"internal/scrapeconn": {},
}

// TestImportRules fails on any import between this module's packages that
// the table above does not allow, as `go list` reports the imports.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/gputop/gputop"
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if pkg == "" {
			continue // the root wires everything
		}
		seen[pkg] = true
		allowed, listed := mayImport[pkg]
		if !listed {
			t.Errorf("package %s has no import rule: add it to mayImport and to ARCHITECTURE.md", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			ok := false
			for _, a := range allowed {
				ok = ok || a == dep
			}
			if !ok {
				t.Errorf("%s imports %s, which its rule does not allow (allowed: %v)", pkg, dep, allowed)
			}
		}
	}
	var stale []string
	for pkg := range mayImport {
		if !seen[pkg] {
			stale = append(stale, pkg)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("rules for packages that no longer exist: %v", stale)
	}
}
