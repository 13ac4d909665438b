package e2e

// The terminals of these tests: each runs on a tmux server of its own.
// tmux's default server is shared with the user and with every other test
// run on the machine, and it exits when its last session ends: a test whose
// new session meets a server that another run's last kill-session is
// taking down fails, and a session started on someone's running server
// gets that server's environment instead of the test's. So every tmux
// command here names its server (-S, a socket in the run's temporary
// directory, removed with it), and a guard (guardTmux) fails the run if
// anything the tests start calls tmux without -L or -S.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
)

var (
	tmuxDir     string // the run's temporary directory (TestMain's)
	tmuxServers atomic.Int64
)

// newTmuxServer is the socket of a server no other terminal, test or run
// uses.
func newTmuxServer() string {
	return filepath.Join(tmuxDir, fmt.Sprintf("tmux-%d", tmuxServers.Add(1)))
}

// tmuxOn is a tmux command on the server at socket server (no
// configuration file read), run with the test's environment less TMUX:
// the server is started by the test's own new-session, so its sessions get
// this environment.
func tmuxOn(server string, args ...string) *exec.Cmd {
	cmd := exec.Command("tmux", append([]string{"-S", server, "-f", "/dev/null"}, args...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TMUX=") && !strings.HasPrefix(e, "TMUX_PANE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return cmd
}

// tmux is a tmux command on the terminal's own server.
func (tm *term) tmux(args ...string) *exec.Cmd { return tmuxOn(tm.server, args...) }

// guardTmux puts scripts/tmux-guard first on PATH: a tmux that runs the
// real one only when it is given a server of its own (-L or -S) and
// otherwise refuses, writing the command line to the log it returns. The
// helpers above, and anything the tests start, go through it. Their
// servers' sockets go in dir.
func guardTmux(dir string) (log string, err error) {
	tmuxDir = dir
	real, err := exec.LookPath("tmux")
	if err != nil {
		return "", nil // the terminal tests fail on their own, saying tmux is missing
	}
	guard, err := filepath.Abs(filepath.Join("..", "scripts", "tmux-guard"))
	if err != nil {
		return "", err
	}
	log = filepath.Join(dir, "tmux-guard.log")
	for k, v := range map[string]string{
		"GPUTOP_TMUX_GUARD_REAL":  real,
		"GPUTOP_TMUX_GUARD_LOG":   log,
		"GPUTOP_TMUX_GUARD_OUTER": os.Getenv("TMUX"),
		"PATH":                    guard + string(os.PathListSeparator) + os.Getenv("PATH"),
	} {
		if err := os.Setenv(k, v); err != nil {
			return "", err
		}
	}
	return log, nil
}
