package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A symlink planted where gputop's socket directory should be is refused
// and reported as a symlink, naming where it points, by every command that
// uses the socket.
func TestPlantedSocketDirSymlink(t *testing.T) {
	runtime := t.TempDir()
	target := t.TempDir()
	dir := filepath.Join(runtime, "gputop")
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	want := "socket directory " + dir + ` is a symlink to "` + target + `", not a directory; remove it or set GPUTOP_SOCKET`
	for _, args := range [][]string{{"snap", "Epoch 5"}, {"--source", "agent"}} {
		cmd := exec.Command(binary, args...)
		var env []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "GPUTOP_SOCKET=") && !strings.HasPrefix(e, "XDG_RUNTIME_DIR=") {
				env = append(env, e)
			}
		}
		cmd.Env = append(env, "XDG_RUNTIME_DIR="+runtime)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Errorf("gputop %s: %v, output %q; want exit 1 and %q", strings.Join(args, " "), err, out, want)
		}
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was touched: %v %v", fi, err)
	}
}

// gputop run's socket sits in a private directory under $TMPDIR; when that
// makes its path too long for a Unix socket, the hint names what works:
// --socket (gputop run sets the command's GPUTOP_SOCKET itself, so setting
// that variable changes nothing), and following it monitors CMD.
func TestRunSocketPathTooLongHint(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "s.sock")
	gputopRun := func(env string, flags ...string) string {
		t.Helper()
		cmd := exec.Command(binary, append(append([]string{"run", "--no-tui", "--source", "agent"}, flags...), "--", "true")...)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gputop run: %v: %s", err, out)
		}
		return string(out)
	}
	const hint = "Unix sockets allow at most 107 (give a shorter one with --socket)"
	if out := gputopRun("GPUTOP_SOCKET=" + short); !strings.Contains(out, "cannot monitor") || !strings.Contains(out, hint) {
		t.Fatalf("with $TMPDIR too long, GPUTOP_SOCKET set: %s; want %q", out, hint)
	}
	if out := gputopRun("GPUTOP_SOCKET=", "--socket", short); strings.Contains(out, "cannot monitor") {
		t.Fatalf("--socket, as the hint says, did not help: %s", out)
	}
}
