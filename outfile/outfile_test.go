package outfile

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func fill(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestResolveKinds(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("x"), 0o600)
	fifo := filepath.Join(dir, "p")
	syscall.Mkfifo(fifo, 0o600)
	os.Symlink("f", filepath.Join(dir, "l1"))
	os.Symlink("l1", filepath.Join(dir, "l2"))
	os.Symlink("nowhere", filepath.Join(dir, "dangling"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	for _, c := range []struct {
		path string
		kind Kind
		name string
		fd   int
	}{
		{"-", Descriptor, "standard output", 1},
		{"/dev/stdout", Descriptor, "/proc/self/fd/1", 1},
		{"/dev/fd/2", Descriptor, "/dev/fd/2", 2},
		{filepath.Join(dir, "new"), New, filepath.Join(dir, "new"), 0},
		{file, Regular, file, 0},
		{fifo, InPlace, fifo, 0},
		{filepath.Join(dir, "l2"), Regular, dir + "/f", 0},
		{filepath.Join(dir, "dangling"), New, dir + "/nowhere", 0},
	} {
		got, err := Resolve(c.path)
		if err != nil || got.Kind != c.kind || got.Name != c.name || got.FD != c.fd {
			t.Errorf("Resolve(%q) = %+v, %v; want kind %d, name %q, fd %d", c.path, got, err, c.kind, c.name, c.fd)
		}
	}
	if _, err := Resolve(filepath.Join(dir, "loop")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a symlink loop: %v", err)
	}
}

func TestResolveRefuses(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	os.WriteFile(ro, []byte("x"), 0o444)
	link := filepath.Join(dir, "to-ro")
	os.Symlink("ro", link)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for path, want := range map[string]string{
		dir:  "cannot write " + dir + ": is a directory",
		ro:   "cannot write " + ro + ": it is read-only (mode 0444)",
		link: "cannot write " + link + " (a symlink to " + dir + "/ro): it is read-only (mode 0444)",
		sock: "cannot write " + sock + ": it is a socket",
		"":   "cannot write : empty path",
	} {
		_, err := Resolve(path)
		var oe *Error
		if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Resolve(%q): %v, want %q", path, err, want)
		}
	}
}

// A failed write leaves the file as it was and no temporary file behind.
func TestWriteFailureKeepsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	os.WriteFile(path, []byte("old"), 0o640)
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error { io.WriteString(w, "half"); return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("file became %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	if err := Write(path, fill("new")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("file %q mode %v", b, fi.Mode())
	}
}

// A descriptor other than stdout is written through, keeping its offset
// and append mode, and stays open.
func TestWriteDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	os.WriteFile(path, []byte("before\n"), 0o644)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := "/dev/fd/" + strconv.Itoa(int(f.Fd()))
	if err := Write(name, fill("after\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("still open\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "before\nafter\nstill open\n" {
		t.Fatalf("file %q", b)
	}
}

func TestCheckStream(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	os.WriteFile(full, []byte("data"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	var he *HoldsDataError
	if _, err := CheckStream(full, false); !errors.As(err, &he) || he.Size != 4 {
		t.Fatalf("a file with data, no replace: %v", err)
	}
	if b, _ := os.ReadFile(full); string(b) != "data" {
		t.Fatal("CheckStream touched the file")
	}
	for _, c := range []struct {
		path    string
		replace bool
	}{{full, true}, {empty, false}} {
		f, err := OpenStream(context.Background(), c.path, c.replace, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		f.WriteString("x")
		f.Close()
		if b, _ := os.ReadFile(c.path); string(b) != "x" {
			t.Fatalf("%s: %q", c.path, b)
		}
	}
}

// A new stream is created with O_EXCL: a file that appeared after the check
// is refused, not truncated.
func TestOpenStreamNewFileAppeared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	tg, err := CheckStream(path, false)
	if err != nil || tg.Kind != New {
		t.Fatal(tg, err)
	}
	os.WriteFile(path, []byte("someone else's"), 0o644)
	// what OpenStream does for a New target once the race is lost
	if _, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666); !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	if _, err := OpenStream(context.Background(), path, false, nil); err == nil {
		t.Fatal("OpenStream over a file with data, without replace")
	}
	if b, _ := os.ReadFile(path); string(b) != "someone else's" {
		t.Fatalf("file %q", b)
	}
}

// A FIFO stream waits for its reader, saying so once, and gives up when
// the context ends.
func TestOpenStreamFIFOWaits(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p")
	syscall.Mkfifo(fifo, 0o600)
	said := 0
	waiting := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := OpenStream(ctx, fifo, false, func() {
			if said++; said == 1 {
				close(waiting)
			}
		})
		done <- err
	}()
	<-waiting
	time.Sleep(3 * fifoPoll) // a few more tries, which must not say it again
	cancel()
	if err := <-done; !errors.Is(err, ErrNoReader) || said != 1 {
		t.Fatalf("err %v, waiting said %d times", err, said)
	}

	got := make(chan string, 1)
	go func() {
		r, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	f, err := OpenStream(context.Background(), fifo, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("through the FIFO")
	f.Close()
	if s := <-got; s != "through the FIFO" {
		t.Fatalf("reader got %q", s)
	}
}

// nobody is the user that plants links in the tests (they run as root, as
// CI does, to give a link away).
const nobody = 65534

// plant makes a symlink at link to dest, owned by uid.
func plant(t *testing.T, dest, link string, uid int) {
	t.Helper()
	if err := os.Symlink(dest, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatalf("giving %s to uid %d (the test runs as root): %v", link, uid, err)
	}
}

// stickyDir makes a directory like /tmp: mode 1777.
func stickyDir(t *testing.T, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return path
}

// Another user's symlink in a sticky world-writable directory is not
// followed (the kernel's fs.protected_symlinks rule), whether it is the
// last component, dangling, or a directory on the way; nothing is written
// where it points, and the error names the link and why.
func TestRefusesOthersLinkInStickyDir(t *testing.T) {
	dir := t.TempDir()
	tmp := stickyDir(t, filepath.Join(dir, "tmp"))
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Mkdir(filepath.Join(dir, "elsewhere"), 0o755)

	plant(t, victim, filepath.Join(tmp, "x.csv"), nobody)
	plant(t, filepath.Join(dir, "created.csv"), filepath.Join(tmp, "dangling.csv"), nobody)
	plant(t, filepath.Join(dir, "elsewhere"), filepath.Join(tmp, "d"), nobody)
	plant(t, "d", filepath.Join(tmp, "mine"), os.Geteuid()) // one's own link, to nobody's
	for path, link := range map[string]string{
		filepath.Join(tmp, "x.csv"):         filepath.Join(tmp, "x.csv"),
		filepath.Join(tmp, "dangling.csv"):  filepath.Join(tmp, "dangling.csv"),
		filepath.Join(tmp, "d", "x.csv"):    filepath.Join(tmp, "d"),
		filepath.Join(tmp, "mine", "x.csv"): filepath.Join(tmp, "d"),
		tmp + "/../tmp/x.csv":               tmp + "/../tmp/x.csv",
	} {
		want := "the symlink " + link + " belongs to uid 65534"
		err := Write(path, fill("new"))
		var le *LinkError
		if !errors.As(err, &le) || le.Owner != nobody || !strings.HasPrefix(err.Error(), "cannot write "+path+": ") ||
			!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "protected_symlinks") {
			t.Errorf("Write(%s): %v; want a LinkError naming %s", path, err, link)
		}
		if _, err := CheckStream(path, true); !errors.As(err, &le) {
			t.Errorf("CheckStream(%s): %v", path, err)
		}
		if _, err := OpenStream(context.Background(), path, true, nil); !errors.As(err, &le) {
			t.Errorf("OpenStream(%s): %v", path, err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link's target became %q", b)
	}
	for _, d := range []string{dir, filepath.Join(dir, "elsewhere")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if n := e.Name(); n != "tmp" && n != "victim" && n != "elsewhere" {
				t.Errorf("%s was made in %s", n, d)
			}
		}
	}
}

// Links the rule lets through are followed as before: one's own in a
// sticky directory, the directory owner's, and anyone's in a directory
// that is not sticky.
func TestFollowsLinksTheRuleAllows(t *testing.T) {
	dir := t.TempDir()
	tmp := stickyDir(t, filepath.Join(dir, "tmp"))
	theirs := stickyDir(t, filepath.Join(dir, "theirs"))
	os.Chown(theirs, nobody, nobody)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	for i, c := range []struct {
		dir string
		uid int
	}{{tmp, os.Geteuid()}, {theirs, nobody}, {open, nobody}} {
		target := filepath.Join(dir, "target"+strconv.Itoa(i))
		link := filepath.Join(c.dir, "l"+strconv.Itoa(i))
		plant(t, target, link, c.uid)
		if err := Write(link, fill("through")); err != nil {
			t.Errorf("link owned by %d in %s: %v", c.uid, c.dir, err)
		}
		if b, _ := os.ReadFile(target); string(b) != "through" {
			t.Errorf("link owned by %d in %s: target %q", c.uid, c.dir, b)
		}
	}
}

// A file with other names (hard links) is written in place, so every name
// sees the new content, as `> FILE` would have it; a rename would leave the
// other names with the old file.
func TestWriteHardLinkedFileInPlace(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	os.WriteFile(a, []byte("old content, longer than the new"), 0o640)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(a)
	if err := Write(a, fill("new")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(a)
	for _, p := range []string{a, b} {
		if got, _ := os.ReadFile(p); string(got) != "new" {
			t.Errorf("%s: %q", p, got)
		}
	}
	if !os.SameFile(before, after) || after.Mode().Perm() != 0o640 {
		t.Errorf("a.csv is another file now (mode %v)", after.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("left behind: %v", ents)
	}
}

// A new file gets 0666 less the umask, from Write and OpenStream alike: a
// umask of 0 or 002 tells that apart from 0644 less the umask.
func TestNewFileModeIsUmaskOf0666(t *testing.T) {
	dir := t.TempDir()
	for _, mask := range []int{0, 0o002, 0o027} {
		old := syscall.Umask(mask)
		w := filepath.Join(dir, "w"+strconv.Itoa(mask))
		werr := Write(w, fill("x"))
		s := filepath.Join(dir, "s"+strconv.Itoa(mask))
		f, serr := OpenStream(context.Background(), s, false, nil)
		syscall.Umask(old)
		if werr != nil || serr != nil {
			t.Fatal(werr, serr)
		}
		f.Close()
		want := fs.FileMode(0o666 &^ mask)
		for _, p := range []string{w, s} {
			if fi, _ := os.Stat(p); fi.Mode().Perm() != want {
				t.Errorf("umask %03o: %s has mode %v, want %v", mask, filepath.Base(p), fi.Mode().Perm(), want)
			}
		}
	}
}
