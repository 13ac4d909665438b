package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Output paths in directories shared with other users: a sticky /tmp where
// another user plants symlinks. The tests run as root (as CI does) to give
// files to nobody.

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

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
