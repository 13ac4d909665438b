package e2e

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The summary CSV goes where the user means it, the way a shell redirect
// would write it: these run `gputop export` and the TUI against real device
// nodes, FIFOs, symlinks, read-only files and directories.

// runSplit runs the binary and keeps its stdout and stderr apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GPUTOP_SOCKET="+filepath.Join(t.TempDir(), "s.sock"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// mknodChar makes a private character device node (never a system one):
// 1/3 behaves as /dev/null, 1/7 as /dev/full.
func mknodChar(t *testing.T, path string, major, minor int) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, major<<8|minor); err != nil {
		t.Fatalf("mknod %s: %v", path, err)
	}
}

// wantCharDev fails unless path is still the character device major/minor.
func wantCharDev(t *testing.T, path string, major, minor int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeCharDevice == 0 || st.Rdev != uint64(major<<8|minor) {
		t.Fatalf("%s is no longer char device %d/%d: mode %v, rdev %#x", path, major, minor, fi.Mode(), st.Rdev)
	}
}

// exportCSV exports rec to a regular file and returns its bytes, to compare
// with what other kinds of path receive.
func exportCSV(t *testing.T, rec string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ref.csv")
	if _, msg, code := runSplit(t, "export", rec, "--csv", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExportCSVToCharDevice(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)

	null := filepath.Join(dir, "null")
	mknodChar(t, null, 1, 3)
	if _, msg, code := runSplit(t, "export", rec, "--csv", null); code != 0 {
		t.Fatalf("--csv to a null device: exit %d: %s", code, msg)
	}
	wantCharDev(t, null, 1, 3)

	full := filepath.Join(dir, "full")
	mknodChar(t, full, 1, 7)
	_, msg, code := runSplit(t, "export", rec, "--csv", full)
	if code != 1 || !strings.Contains(msg, full) || !strings.Contains(msg, "no space left on device") {
		t.Fatalf("--csv to a full device: exit %d: %s", code, msg)
	}
	wantCharDev(t, full, 1, 7)
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Fatalf("files left beside the nodes: %v", ents)
	}
}

func TestExportCSVToFIFO(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	want := exportCSV(t, rec)
	fifo := filepath.Join(dir, "csv.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// nothing reading: a clear error, not a hang, and the FIFO stays
	_, msg, code := runSplit(t, "export", rec, "--csv", fifo)
	if code != 1 || !strings.Contains(msg, fifo) || !strings.Contains(msg, "nothing is reading") {
		t.Fatalf("FIFO without a reader: exit %d: %s", code, msg)
	}
	// a reader that opened it first receives the whole CSV (it fits the
	// pipe buffer, so the writer never waits for it)
	rfd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(rfd)
	if _, msg, code := runSplit(t, "export", rec, "--csv", fifo); code != 0 {
		t.Fatalf("FIFO with a reader: exit %d: %s", code, msg)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(rfd, buf)
		if n <= 0 || err != nil {
			break
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the FIFO's reader got %q, want %q", got, want)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("%s is no longer a FIFO: %v %v", fifo, fi.Mode(), err)
	}
}

// A symlink is followed: its target is replaced atomically (keeping its
// mode), the link stays a link; a dangling link's target is created.
func TestExportCSVThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	want := exportCSV(t, rec)
	os.Mkdir(filepath.Join(dir, "real"), 0o755)
	target := filepath.Join(dir, "real", "summary.csv")
	if err := os.WriteFile(target, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.csv")
	if err := os.Symlink("real/summary.csv", link); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := runSplit(t, "export", rec, "--csv", link); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if dest, err := os.Readlink(link); err != nil || dest != "real/summary.csv" {
		t.Fatalf("the link was replaced: %q %v", dest, err)
	}
	got, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if !bytes.Equal(got, want) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("target: mode %v, content %q", fi.Mode(), got)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "real")); len(ents) != 1 {
		t.Fatalf("temporary files left beside the target: %v", ents)
	}

	dangling := filepath.Join(dir, "new.csv")
	os.Symlink("real/new.csv", dangling)
	if _, msg, code := runSplit(t, "export", rec, "--csv", dangling); code != 0 {
		t.Fatalf("dangling link: exit %d: %s", code, msg)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "real", "new.csv")); !bytes.Equal(got, want) {
		t.Fatalf("dangling link's target: %q", got)
	}
	if fi, _ := os.Lstat(dangling); fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the dangling link was replaced")
	}
}

// A read-only file is refused (root would be let through by open, so the
// mode is what counts), its content and mode untouched.
func TestExportCSVReadOnlyFile(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	ro := filepath.Join(dir, "ro.csv")
	os.WriteFile(ro, []byte("keep me\n"), 0o444)
	os.Chmod(ro, 0o444)
	_, msg, code := runSplit(t, "export", rec, "--csv", ro)
	if code != 1 || !strings.Contains(msg, ro) || !strings.Contains(msg, "read-only") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	got, _ := os.ReadFile(ro)
	fi, _ := os.Stat(ro)
	if string(got) != "keep me\n" || fi.Mode().Perm() != 0o444 {
		t.Fatalf("read-only file changed: mode %v, content %q", fi.Mode(), got)
	}
}

// A new file gets 0666 less the umask, as `> FILE` would; an existing one
// keeps its mode. Umasks 002 and 0 tell 0666 apart from 0644 (027 gives
// 0640 from either), for the CSV and for a recording.
func TestExportCSVMode(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o027, 0o640}, {0o002, 0o664}, {0, 0o666}} {
		old := syscall.Umask(c.umask)
		out := filepath.Join(dir, fmt.Sprintf("new%03o.csv", c.umask))
		_, msg, code := runSplit(t, "export", rec, "--csv", out)
		recOut := filepath.Join(dir, fmt.Sprintf("new%03o.gputop", c.umask))
		rmsg, rcode := run(t, "record", "-o", recOut, "--source", "agent", "--socket", filepath.Join(dir, "s.sock"), "--duration", "100ms")
		syscall.Umask(old)
		if code != 0 || rcode != 0 {
			t.Fatalf("umask %03o: export: exit %d: %s; record: exit %d: %s", c.umask, code, msg, rcode, rmsg)
		}
		for _, p := range []string{out, recOut} {
			if fi, _ := os.Stat(p); fi.Mode().Perm() != c.want {
				t.Errorf("umask %03o: new %s has mode %v, want %v", c.umask, filepath.Base(p), fi.Mode().Perm(), c.want)
			}
		}
	}
	out := filepath.Join(dir, "new027.csv")
	os.Chmod(out, 0o604)
	if _, msg, code := runSplit(t, "export", rec, "--csv", out); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o604 {
		t.Fatalf("existing file's mode became %v, want 0604", fi.Mode().Perm())
	}
}

func TestExportCSVDirectory(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	_, msg, code := runSplit(t, "export", rec, "--csv", sub)
	if code != 1 || !strings.Contains(msg, sub+": is a directory") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatalf("directory gone: %v", err)
	}
}

// `--csv -` and `--csv /dev/stdout` write the CSV to standard output (the
// rest of export's report goes to stderr then), so it can be piped.
func TestExportCSVToStdout(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	want := exportCSV(t, rec)
	for _, p := range []string{"-", "/dev/stdout"} {
		out, msg, code := runSplit(t, "export", rec, "--csv", p)
		if code != 0 || out != string(want) || !strings.Contains(msg, "(1 row)") {
			t.Fatalf("--csv %s: exit %d, stdout %q, stderr %q", p, code, out, msg)
		}
	}
	cmd := exec.Command("bash", "-o", "pipefail", "-c", `"$0" export "$1" --csv - | head -1`, binary, rec)
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "label,time,device,") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("export --csv - | head -1: %v: %q", err, out)
	}
	recs, err := csv.NewReader(strings.NewReader(string(want))).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("CSV from stdout: %v %v", recs, err)
	}
}

// The TUI owns the terminal: --csv - is refused before anything starts.
func TestTUIRefusesCSVToStdout(t *testing.T) {
	_, msg, code := runSplit(t, "--demo", "--csv", "-")
	if code != 2 || !strings.Contains(msg, "--csv -") || !strings.Contains(msg, "gputop export") {
		t.Fatalf("exit %d: %s", code, msg)
	}
}

// `e` in the real TUI on a full device: the error in the status line, the
// rows kept, the node still a device; q then fails the same way and a
// second q leaves.
func TestTUIExportKeyToFullDevice(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	full := filepath.Join(dir, "full")
	mknodChar(t, full, 1, 7)
	tm := startTerm(t, 250, 50, "--replay", rec, "--csv", full) // wide: the whole error fits the status line
	tm.waitFor("Recorded start  0:00:01.0")
	tm.keys("e")
	scr := tm.waitFor("no space left on device")
	if !strings.Contains(scr, "Recorded start") {
		t.Fatalf("rows gone after a failed export:\n%s", scr)
	}
	wantCharDev(t, full, 1, 7)
	tm.keys("q")
	tm.waitFor("q again")
	tm.keys("q")
	tm.waitExit()
	wantCharDev(t, full, 1, 7)
}

// Quitting with --csv through a symlink to a 0600 file and, on SIGTERM, to
// a null device node: the target is written, the link and the node stay.
func TestTUICSVOnQuitAndSignal(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	want := exportCSV(t, rec)
	target := filepath.Join(dir, "target.csv")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link.csv")
	os.Symlink(target, link)
	tm := startTerm(t, 160, 50, "--replay", rec, "--csv", link)
	tm.waitFor("Recorded start  0:00:01.0")
	tm.keys("q")
	tm.waitExit()
	got, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if !bytes.Equal(got, want) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("target after q: mode %v, %q", fi.Mode(), got)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}

	null := filepath.Join(dir, "null")
	mknodChar(t, null, 1, 3)
	tm = startTerm(t, 160, 50, "--replay", rec, "--csv", null)
	tm.waitFor("Recorded start  0:00:01.0")
	syscall.Kill(tm.pid, syscall.SIGTERM)
	tm.waitExit()
	wantCharDev(t, null, 1, 3)
}
