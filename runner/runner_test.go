package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOutputAsATerminalShowsIt(t *testing.T) {
	var o Output
	// a progress bar redrawn in place, colours, a window title, an erase,
	// a tab, a backspace, and a UTF-8 character split across two writes
	for _, chunk := range []string{
		"\x1b[32mgreen\x1b[0m text\n",
		"\x1b]0;pwned\x07title gone\n",
		"10%\r50%\r100%\n",
		"abcdef\r\x1b[Kxy\n",
		"a\tb\n",
		"abc\bX\n",
		"caf\xc3", "\xa9\n",
		"bell\x07 and \x1b[1;31mred\n",
		"unfinished",
	} {
		o.Write([]byte(chunk))
	}
	got, total := o.Tail(0, 100)
	want := []string{"green text", "title gone", "100%", "xy", "a       b", "abX", "café", "bell and red", "unfinished"}
	if !slices.Equal(got, want) || total != len(want) {
		t.Fatalf("lines:\n%q\nwant\n%q", got, want)
	}
	if got, _ := o.Tail(2, 2); !slices.Equal(got, []string{"abX", "café"}) {
		t.Fatalf("Tail(2, 2) = %q", got)
	}
}

func TestOutputKeepsTheLastMaxLines(t *testing.T) {
	var o Output
	for i := 0; i < MaxLines+5; i++ {
		o.Write([]byte("line\n"))
	}
	o.Write([]byte("last\n"))
	got, total := o.Tail(0, 2)
	if total != MaxLines || !slices.Equal(got, []string{"line", "last"}) {
		t.Fatalf("total %d, tail %q", total, got)
	}
}

func TestOutputKeepsWhatItIsToldTo(t *testing.T) {
	o := Output{Keep: 3}
	for _, l := range []string{"a", "b", "c", "d", "e"} {
		o.Write([]byte(l + "\n"))
	}
	if got, total := o.Tail(0, 10); total != 3 || !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("total %d, tail %q", total, got)
	}
}

// The caps the agent's _cap wrote in the events file: set, refused, at
// most MaxCaps of them.
func TestEventsReadTheMemoryCaps(t *testing.T) {
	in, err := Prepare("")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Remove()
	lines := "12 python /usr/bin/python3\n" +
		"12 cap dev=0 cap=17179869184 free=150000000000 total=150754820096\n" +
		"13 cap dev=1 error=Unsupported: this framework cannot cap the memory it takes\n" +
		"14 cap dev=0\n" +
		"x cap dev=0 cap=1\n"
	for i := 0; i < MaxCaps; i++ {
		lines += "15 cap dev=0 cap=1 free=2 total=3\n"
	}
	if err := os.WriteFile(filepath.Join(in.Dir, "events"), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := in.Events()
	if len(ev.Caps) != MaxCaps || ev.Pythons != 1 {
		t.Fatalf("%d caps, %d pythons", len(ev.Caps), ev.Pythons)
	}
	want := []Cap{
		{PID: 12, Dev: 0, Cap: 17179869184, Free: 150000000000, Total: 150754820096},
		{PID: 13, Dev: 1, Error: "Unsupported: this framework cannot cap the memory it takes"},
		{PID: 14, Dev: 0, Error: "the agent said nothing of the cap it set"},
		{PID: 15, Dev: 0, Cap: 1, Free: 2, Total: 3},
	}
	if !slices.Equal(ev.Caps[:4], want) {
		t.Fatalf("caps %+v\nwant %+v", ev.Caps[:4], want)
	}
}

func TestEnvPutsTheInjectionFirst(t *testing.T) {
	in := &Injection{Dir: "/tmp/gputop-run-1", Socket: "/tmp/gputop-run-1/gputop.sock", AgentDir: "/opt/agent"}
	env := in.Env([]string{"PATH=/bin", "PYTHONPATH=/a::/b", "GPUTOP_SOCKET=/elsewhere"})
	want := []string{"PATH=/bin", "PYTHONPATH=/tmp/gputop-run-1:/a::/b", "GPUTOP_SOCKET=/tmp/gputop-run-1/gputop.sock",
		"GPUTOP_RUN_DIR=/tmp/gputop-run-1", "GPUTOP_AGENT_PATH=/opt/agent"}
	if !slices.Equal(env, want) {
		t.Fatalf("env %q", env)
	}
	// an empty PYTHONPATH stays without an empty entry (which would put the
	// working directory on sys.path)
	env = in.Env([]string{"PYTHONPATH="})
	if env[0] != "PYTHONPATH=/tmp/gputop-run-1" {
		t.Fatalf("env %q", env)
	}
}

func TestFindAgentLayouts(t *testing.T) {
	t.Setenv("GPUTOP_AGENT_PATH", "")
	pkg := func(d string) {
		if err := os.MkdirAll(filepath.Join(d, "gputop"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "gputop", "_autorun.py"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	// a checkout: ./gputop beside agent/gputop
	pkg(filepath.Join(root, "repo", "agent"))
	// a venv: bin/gputop, lib/python3.12/site-packages/gputop
	site := filepath.Join(root, "venv", "lib", "python3.12", "site-packages")
	pkg(site)
	// the binary inside the package
	pkg(filepath.Join(root, "site"))
	os.MkdirAll(filepath.Join(root, "site", "gputop", "_bin"), 0o755)
	// a symlink to a venv's binary (pipx): the venv is found
	os.MkdirAll(filepath.Join(root, "venv", "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "venv", "bin", "gputop"), nil, 0o755)
	os.MkdirAll(filepath.Join(root, "local", "bin"), 0o755)
	os.Symlink(filepath.Join(root, "venv", "bin", "gputop"), filepath.Join(root, "local", "bin", "gputop"))
	for exe, want := range map[string]string{
		filepath.Join(root, "repo", "gputop"):                   filepath.Join(root, "repo", "agent"),
		filepath.Join(root, "venv", "bin", "gputop"):            site,
		filepath.Join(root, "site", "gputop", "_bin", "gputop"): filepath.Join(root, "site"),
		filepath.Join(root, "local", "bin", "gputop"):           site,
		filepath.Join(root, "nowhere", "gputop"):                "",
	} {
		if got := FindAgent(exe); got != want {
			t.Errorf("FindAgent(%s) = %q, want %q", exe, got, want)
		}
	}
	t.Setenv("GPUTOP_AGENT_PATH", "/chosen")
	if got := FindAgent(filepath.Join(root, "repo", "gputop")); got != "/chosen" {
		t.Errorf("with GPUTOP_AGENT_PATH: %q", got)
	}
}

func TestEndedNamesTheSignal(t *testing.T) {
	cmd := exec.Command("sh", "-c", "kill -TERM $$")
	cmd.Run()
	code, how := Ended(cmd.ProcessState)
	if code != 143 || how != "killed by signal 15 (SIGTERM)" {
		t.Fatalf("%d %q", code, how)
	}
	cmd = exec.Command("sh", "-c", "exit 3")
	cmd.Run()
	if code, how := Ended(cmd.ProcessState); code != 3 || !strings.Contains(how, "code 3") {
		t.Fatalf("%d %q", code, how)
	}
}
