package agentlink

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSocketPathOverride(t *testing.T) {
	p, err := socketPath(env(map[string]string{SocketEnv: "/some/where.sock", "XDG_RUNTIME_DIR": "/run/user/1"}), 1, "/tmp")
	if err != nil || p != "/some/where.sock" {
		t.Errorf("got %q %v", p, err)
	}
	t.Setenv(SocketEnv, "/elsewhere.sock")
	if p, err := DefaultSocketPath(); err != nil || p != "/elsewhere.sock" {
		t.Errorf("DefaultSocketPath with %s: %q %v", SocketEnv, p, err)
	}
}

func TestSocketPathXDG(t *testing.T) {
	rt := t.TempDir()
	p, err := socketPath(env(map[string]string{"XDG_RUNTIME_DIR": rt}), os.Getuid(), "/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rt, "gputop", "gputop.sock"); p != want {
		t.Errorf("path %q, want %q", p, want)
	}
	fi, err := os.Stat(filepath.Dir(p))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", fi.Mode(), err)
	}
	// A second call accepts the directory it made.
	if p2, err := socketPath(env(map[string]string{"XDG_RUNTIME_DIR": rt}), os.Getuid(), ""); err != nil || p2 != p {
		t.Errorf("second call: %q %v", p2, err)
	}
}

func TestSocketPathTmp(t *testing.T) {
	tmp := t.TempDir()
	uid := os.Getuid()
	p, err := socketPath(env(nil), uid, tmp)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "gputop-"+strconv.Itoa(uid))
	if p != filepath.Join(dir, "gputop.sock") {
		t.Errorf("path %q", p)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v %v", fi.Mode(), err)
	}
}

func TestSocketDirRefused(t *testing.T) {
	uid := os.Getuid()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "gputop-"+strconv.Itoa(uid))

	// Open to others.
	os.Mkdir(dir, 0o700)
	os.Chmod(dir, 0o755)
	_, err := socketPath(env(nil), uid, tmp)
	if err == nil || !strings.Contains(err.Error(), "has mode 0755") || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Errorf("mode 0755: %v", err)
	}
	os.Chmod(dir, 0o700)

	// Owned by someone else (checked as if we were another uid).
	err = checkDir(dir, uid+1)
	if err == nil || !strings.Contains(err.Error(), "is owned by uid "+strconv.Itoa(uid)+", not by you (uid "+strconv.Itoa(uid+1)+")") {
		t.Errorf("foreign owner: %v", err)
	}
	if err := checkDir(dir, uid); err != nil {
		t.Errorf("own 0700 directory refused: %v", err)
	}

	// A symlink planted where the directory should be.
	os.Remove(dir)
	target := t.TempDir()
	os.Chmod(target, 0o700)
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := socketPath(env(nil), uid, tmp); err == nil || !strings.Contains(err.Error(), dir+" is a symlink to \""+target+"\", not a directory") {
		t.Errorf("symlink: %v", err)
	}

	// A plain file.
	os.Remove(dir)
	os.WriteFile(dir, nil, 0o600)
	if _, err := socketPath(env(nil), uid, tmp); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("file: %v", err)
	}
}
