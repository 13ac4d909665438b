package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// What the test scripts install, read from them: every script .ci/run
// runs (bash PATH, followed from script to script), the Debian packages of
// their apt-get install and apt-get download lines, the Python packages of
// each requirements file a pip install -r names, and go.mod's direct
// requirements when a script runs go mod download.
type installs struct {
	debian, python, goModules []string
	scripts                   []string
}

var (
	bashScript  = regexp.MustCompile(`\bbash ((?:\.ci|scripts)/[\w./-]+)`)
	aptInstall  = regexp.MustCompile(`apt-get install ([^>&|;)"']*)`)
	aptDownload = regexp.MustCompile(`apt.*\bdownload ([\w.+-]+)`)
	pipRequire  = regexp.MustCompile(`pip install .*-r ([\w./-]+)`)
	requirement = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)`)
)

func readInstalls(t *testing.T, first string) installs {
	t.Helper()
	var in installs
	queue := []string{first}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if slices.Contains(in.scripts, path) {
			continue
		}
		in.scripts = append(in.scripts, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range bashScript.FindAllStringSubmatch(line, -1) {
				queue = append(queue, m[1])
			}
			if m := aptInstall.FindStringSubmatch(line); m != nil {
				for _, f := range strings.Fields(m[1]) {
					if !strings.HasPrefix(f, "-") {
						in.debian = append(in.debian, f)
					}
				}
			}
			// apt's download of "libc6:amd64" fetches the package libc6
			if m := aptDownload.FindStringSubmatch(strings.ReplaceAll(line, ":", " ")); m != nil {
				in.debian = append(in.debian, m[1])
			}
			if m := pipRequire.FindStringSubmatch(line); m != nil {
				req, err := os.ReadFile(m[1])
				if err != nil {
					t.Fatalf("%s installs from %s: %v", path, m[1], err)
				}
				for _, r := range strings.Split(string(req), "\n") {
					if n := requirement.FindString(strings.TrimSpace(r)); n != "" {
						in.python = append(in.python, n)
					}
				}
			}
			if strings.Contains(line, "go mod download") {
				in.goModules = append(in.goModules, directRequirements(t)...)
			}
		}
	}
	for _, l := range []*[]string{&in.debian, &in.python, &in.goModules} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return in
}

// directRequirements are go.mod's requirements but the indirect ones.
func directRequirements(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
		case line == ")":
			inBlock = false
		case strings.Contains(line, "// indirect"):
		case inBlock && line != "":
			out = append(out, strings.Fields(line)[0])
		case strings.HasPrefix(line, "require "):
			out = append(out, strings.Fields(line)[1])
		}
	}
	return out
}

// The README's "Tests" section names, as code, every package .ci/run and
// the scripts it runs install: a package added to a script and not to the
// README fails here.
func TestREADMEListsWhatTheTestsInstall(t *testing.T) {
	in := readInstalls(t, ".ci/run")
	if len(in.debian) < 5 || len(in.python) < 5 || len(in.goModules) < 5 || !slices.Contains(in.scripts, "scripts/test.sh") {
		t.Fatalf("read too little from the scripts (%q): Debian %q, Python %q, Go %q", in.scripts, in.debian, in.python, in.goModules)
	}
	t.Logf("from %q: Debian %q; Python %q; Go %q", in.scripts, in.debian, in.python, in.goModules)
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tests, ok := strings.Cut(string(b), "\n## Tests\n")
	if !ok {
		t.Fatal(`README.md has no "## Tests" section`)
	}
	tests, _, _ = strings.Cut(tests, "\n## ")
	for _, kind := range []struct {
		what  string
		names []string
	}{{"Debian package", in.debian}, {"Python package", in.python}, {"Go module", in.goModules}} {
		for _, n := range kind.names {
			if !strings.Contains(tests, "`"+n+"`") {
				t.Errorf("the tests install the %s %s (%s), and README's Tests section does not name it as `%s`", kind.what, n, strings.Join(in.scripts, ", "), n)
			}
		}
	}
}
