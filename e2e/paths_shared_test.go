package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Output paths in directories shared with other users: a sticky /tmp where
// another user plants symlinks, a CSV with other names, a CSV in a
// directory the user may not write. The tests run as root (as CI does) to
// give files to nobody and to run the binary as nobody.

const nobody = 65534

// TestOutputsRefuseOthersSymlinkInStickyDir: a symlink that nobody planted
// in a sticky world-writable directory is not followed by root's gputop,
// for any output (the kernel's fs.protected_symlinks rule, which gputop's
// own link following would otherwise sidestep): each says why and names
// the link, the link's target keeps its content, a dangling link's target
// is not created, and a link through a planted directory writes nothing
// there either.
func TestOutputsRefuseOthersSymlinkInStickyDir(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "root-owned.csv")
	os.WriteFile(victim, []byte("root's file\n"), 0o644)
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	plant := func(dest, link string) {
		t.Helper()
		if err := os.Symlink(dest, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, nobody, nobody); err != nil {
			t.Fatalf("giving %s to nobody (the test runs as root): %v", link, err)
		}
	}
	toVictim := filepath.Join(tmp, "x.csv")
	plant(victim, toVictim)
	dangling := filepath.Join(tmp, "y.csv")
	plant(filepath.Join(dir, "created.csv"), dangling)
	plant(elsewhere, filepath.Join(tmp, "d"))
	throughDir := filepath.Join(tmp, "d", "z.csv")

	sock := filepath.Join(dir, "s.sock")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"export", rec, "--csv", "%s"}, 1},
		{[]string{"--replay", rec, "--csv", "%s"}, 2},
		{[]string{"run", "--csv", "%s", "--", "true"}, 2},
		{[]string{"run", "--record", "%s", "--", "true"}, 1},
		{[]string{"record", "-o", "%s", "--source", "agent", "--socket", sock, "--duration", "1s"}, 1},
		{[]string{"--record", "%s", "--source", "agent", "--socket", sock}, 1},
		{[]string{"serve", "-o", "%s", "--source", "agent", "--socket", sock}, 1},
	} {
		for path, link := range map[string]string{toVictim: toVictim, dangling: dangling, throughDir: filepath.Join(tmp, "d")} {
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = strings.ReplaceAll(a, "%s", path)
			}
			_, msg, code := runSplit(t, args...)
			if code != c.code || !strings.Contains(msg, "cannot write "+path+": the symlink "+link+" belongs to uid 65534") ||
				!strings.Contains(msg, "fs.protected_symlinks") {
				t.Errorf("gputop %s: exit %d (want %d): %s", strings.Join(args, " "), code, c.code, msg)
			}
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's file\n" {
		t.Errorf("the planted link's target became %q", b)
	}
	for _, p := range []string{filepath.Join(dir, "created.csv"), filepath.Join(elsewhere, "z.csv")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created through a planted link", p)
		}
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written through a planted directory link: %v", ents)
	}

	// root's own link there is followed as before
	own := filepath.Join(tmp, "own.csv")
	os.Symlink(filepath.Join(dir, "own-target.csv"), own)
	if _, msg, code := runSplit(t, "export", rec, "--csv", own); code != 0 {
		t.Fatalf("own link in a sticky directory: exit %d: %s", code, msg)
	}
	if got, want := readFile(t, filepath.Join(dir, "own-target.csv")), exportCSV(t, rec); !bytes.Equal(got, want) {
		t.Fatalf("own link's target: %q", got)
	}
}

// A CSV with a second name (a hard link) is written in place, so both
// names see the new summary, as `> FILE` would have it; a rename would
// have left the other name with the old file.
func TestExportCSVHardLinked(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	want := exportCSV(t, rec)
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	os.WriteFile(a, bytes.Repeat([]byte("old,longer than the new summary\n"), 100), 0o640)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(a)
	if _, msg, code := runSplit(t, "export", rec, "--csv", a); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	for _, p := range []string{a, b} {
		if got := readFile(t, p); !bytes.Equal(got, want) {
			t.Errorf("%s: %q", filepath.Base(p), got)
		}
	}
	if after, _ := os.Stat(a); !os.SameFile(before, after) || after.Mode().Perm() != 0o640 {
		t.Errorf("a.csv is another file now (mode %v)", after.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("files left beside the CSV: %v", ents)
	}
}

// A CSV the user may write, in a directory the user may not (a shared
// file in someone else's directory): no file can be made beside it for an
// atomic replace, so it is written in place, as `> FILE` would. The binary
// runs as nobody (root would be let through by the directory's mode).
func TestExportCSVWritableFileInUnwritableDir(t *testing.T) {
	dir, err := os.MkdirTemp("", "gputop-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // root's; nobody may read and enter it, not write it
	bin := filepath.Join(dir, "gputop")
	copyFile(t, binary, bin)
	os.Chmod(bin, 0o755)
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	os.Chmod(rec, 0o644)
	want := exportCSV(t, rec)
	out := filepath.Join(dir, "shared.csv")
	os.WriteFile(out, []byte("old\n"), 0o644)
	if err := os.Chown(out, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(out)

	cmd := exec.Command(bin, "export", rec, "--csv", out)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GPUTOP_SOCKET=" + filepath.Join(dir, "no.sock")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v: %s", err, msg)
	}
	after, _ := os.Stat(out)
	if got := readFile(t, out); !bytes.Equal(got, want) || !os.SameFile(before, after) {
		t.Fatalf("shared.csv: same file %v, content %q", os.SameFile(before, after), got)
	}
	if st := after.Sys().(*syscall.Stat_t); st.Uid != nobody || after.Mode().Perm() != 0o644 {
		t.Fatalf("shared.csv: owner %d, mode %v", st.Uid, after.Mode())
	}

	// a file nobody may not write either: refused with the path, untouched
	os.Chown(out, 0, 0)
	cmd = exec.Command(bin, "export", rec, "--csv", out)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GPUTOP_SOCKET=" + filepath.Join(dir, "no.sock")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	msg, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(msg), "cannot write "+out+": permission denied") {
		t.Fatalf("a file nobody may not write: %v: %s", err, msg)
	}
	if got := readFile(t, out); !bytes.Equal(got, want) {
		t.Fatalf("refused, yet shared.csv became %q", got)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
