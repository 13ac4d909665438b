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
