package agentlink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// SocketEnv names the environment variable that overrides the socket path,
// for gputop and the agent alike.
const SocketEnv = "GPUTOP_SOCKET"

// DefaultSocketPath returns where gputop listens and agents connect:
// $GPUTOP_SOCKET if set; else $XDG_RUNTIME_DIR/gputop/gputop.sock; else
// /tmp/gputop-$UID/gputop.sock. For the two defaults it creates the directory
// (mode 0700) and refuses one that another user owns, that is a symlink, or
// that group or others can enter, since anyone who can reach the socket can
// feed this gputop.
func DefaultSocketPath() (string, error) {
	// /tmp itself rather than $TMPDIR: the agent must find the same path
	// whatever its environment.
	return socketPath(os.Getenv, os.Getuid(), "/tmp")
}

func socketPath(getenv func(string) string, uid int, tmp string) (string, error) {
	if p := getenv(SocketEnv); p != "" {
		return p, nil
	}
	var dir string
	if rt := getenv("XDG_RUNTIME_DIR"); rt != "" {
		dir = filepath.Join(rt, "gputop")
	} else {
		dir = filepath.Join(tmp, fmt.Sprintf("gputop-%d", uid))
	}
	if err := ensureDir(dir, uid); err != nil {
		return "", err
	}
	return filepath.Join(dir, "gputop.sock"), nil
}

// ensureDir creates dir with mode 0700 if it is missing, then checks it.
func ensureDir(dir string, uid int) error {
	// Mkdir, not MkdirAll: in a shared /tmp the parent must already exist,
	// and creating intermediate directories there would be someone else's.
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("socket directory: %w", err)
	}
	return checkDir(dir, uid)
}

// checkDir refuses a socket directory that is not a real directory owned by
// uid and closed to group and others.
func checkDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		to, err := os.Readlink(dir)
		if err != nil {
			to = "?"
		}
		// %q: the target is whatever was planted, escape sequences included
		return fmt.Errorf("socket directory %s is a symlink to %q, not a directory; remove it or set %s", dir, to, SocketEnv)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory; remove it or set %s", dir, SocketEnv)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by you (uid %d); remove it or set %s",
			dir, st.Uid, uid, SocketEnv)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("socket directory %s has mode %04o; group and others must have no access (chmod 700 %s)",
			dir, perm, dir)
	}
	return nil
}
