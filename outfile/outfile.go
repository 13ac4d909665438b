// Package outfile writes to a path the way the user means it, as a shell
// redirect would, but without ever replacing or truncating what the user
// did not ask to replace:
//
//   - "-" is standard output; so are /dev/stdout and /dev/fd/1, and any
//     /dev/fd/N or /proc/self/fd/N is that open descriptor, written as it
//     is (its offset, its append mode);
//   - a character device or a FIFO is written where it is, never replaced;
//   - a symlink is followed, and its target is written as if it had been
//     named (a dangling link's target is created), except one that another
//     user planted in a sticky world-writable directory such as /tmp
//     (LinkError: the kernel's fs.protected_symlinks rule, applied to
//     every link on the way, links.go);
//   - a directory, a socket or a block device is refused, and so is an
//     existing file without write permission for its owner (checked on
//     the mode bits, so that root is refused too);
//   - a new file gets 0666 less the umask; an existing file keeps its mode.
//
// Write replaces a regular file atomically (a summary written whole), or
// writes it in place where a rename would lose its other names or cannot
// be done;
// OpenStream opens one to be written from its start (a recording) and
// truncates an existing one only when told to.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Stdout is the path that means standard output.
const Stdout = "-"

// Kind says how a path is written.
type Kind int

const (
	New        Kind = iota // nothing there yet: a new file is created
	Regular                // an existing regular file
	InPlace                // a character device or a FIFO: written where it is
	Descriptor             // "-" or an open descriptor (/dev/stdout, /dev/fd/N)
)

// Target is what a path names, with its symlinks followed.
type Target struct {
	Path string      // as the user gave it
	Name string      // the file written: Path with its symlinks followed
	Kind Kind        //
	FD   int         // the descriptor, for Descriptor
	Info fs.FileInfo // what is at Name now (Regular, InPlace)
}

// Error is a path that cannot be written, and why.
type Error struct {
	Path string // as the user gave it
	Name string // the symlink's target, when Path is a symlink
	Err  error
}

func (e *Error) Error() string {
	p := e.Path
	if e.Name != "" && e.Name != e.Path {
		p += " (a symlink to " + e.Name + ")"
	}
	return "cannot write " + p + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func (t Target) fail(err error) error {
	// the path is in the message already; the temporary file's name or
	// the syscall's is noise
	switch e := err.(type) {
	case *fs.PathError:
		err = e.Err
	case *os.LinkError:
		err = e.Err
	case *os.SyscallError:
		err = e.Err
	}
	return &Error{Path: t.Path, Name: t.Name, Err: err}
}

// errReadOnly is an existing file whose mode has no write bit for its owner.
type errReadOnly fs.FileMode

func (e errReadOnly) Error() string {
	return fmt.Sprintf("it is read-only (mode %04o) and is left as it is; make it writable (chmod u+w) or choose another path", fs.FileMode(e).Perm())
}

// maxLinks is how many symlinks are followed, as the kernel does (ELOOP).
const maxLinks = 40

// Resolve looks at path without changing anything. It follows symlinks and
// returns what would be written, or an *Error for what is refused: a
// directory, a socket, a block device, a read-only file, a symlink of
// another user's in a sticky directory (a *LinkError inside), a directory
// that does not exist.
func Resolve(path string) (Target, error) {
	t := Target{Path: path, Name: path}
	if path == "" {
		return t, t.fail(errors.New("empty path"))
	}
	if path == Stdout {
		t.Kind, t.FD, t.Name = Descriptor, 1, "standard output"
		return t, nil
	}
	links := 0
	for links <= maxLinks {
		if fd, ok := descriptor(t.Name); ok {
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil {
				return t, t.fail(fmt.Errorf("descriptor %d: %w", fd, err))
			}
			t.Kind, t.FD = Descriptor, fd
			return t, nil
		}
		dir := parent(t.Name)
		if err := checkDir(dir, &links); err != nil {
			return t, t.fail(err)
		}
		fi, err := os.Lstat(t.Name)
		if errors.Is(err, fs.ErrNotExist) {
			t.Kind = New
			return t, nil
		}
		if err != nil {
			return t, t.fail(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if err := mayFollow(t.Name, fi, dir); err != nil {
				return t, t.fail(err)
			}
			dest, err := os.Readlink(t.Name)
			if err != nil {
				return t, t.fail(err)
			}
			if !filepath.IsAbs(dest) && dir != "." {
				// not filepath.Join: cleaning "dir/../x" would be wrong
				// where dir is itself a symlink
				dest = dir + string(filepath.Separator) + dest
			}
			t.Name = dest
			links++
			continue
		}
		t.Info = fi
		m := fi.Mode()
		switch {
		case m.IsDir():
			return t, t.fail(syscall.EISDIR)
		case m&fs.ModeSocket != 0:
			return t, t.fail(errors.New("it is a socket"))
		case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
			return t, t.fail(errors.New("it is a block device (only files, FIFOs and character devices are written)"))
		case m.IsRegular():
			t.Kind = Regular
		default: // character device, FIFO
			t.Kind = InPlace
		}
		if m.Perm()&0o200 == 0 {
			return t, t.fail(errReadOnly(m))
		}
		return t, nil
	}
	return t, t.fail(syscall.ELOOP)
}

// descriptor reports whether name is an open descriptor of this process:
// /dev/fd/N, /proc/self/fd/N (and so /dev/stdout, a symlink to
// /proc/self/fd/1). Opening such a name would start a new file description
// at offset 0; writing to the descriptor itself is what the user means.
func descriptor(name string) (int, bool) {
	dir, base := filepath.Dir(name), filepath.Base(name)
	fd, err := strconv.Atoi(base)
	if err != nil || fd < 0 {
		return 0, false
	}
	switch dir {
	case "/dev/fd", "/proc/self/fd", "/proc/thread-self/fd", "/proc/" + strconv.Itoa(os.Getpid()) + "/fd":
		return fd, true
	}
	if !strings.HasPrefix(dir, "/") {
		return 0, false
	}
	a, err1 := os.Stat(dir)
	b, err2 := os.Stat("/proc/self/fd")
	return fd, err1 == nil && err2 == nil && os.SameFile(a, b)
}

// file returns the descriptor as a file. Standard output and error are
// returned as they are (so a closed pipe ends the process with SIGPIPE, as
// it does for any program); other descriptors are duplicated, so closing
// the result leaves the original open.
func (t Target) file() (*os.File, error) {
	switch t.FD {
	case 1:
		return os.Stdout, nil
	case 2:
		return os.Stderr, nil
	}
	fd, err := syscall.Dup(t.FD)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), t.Name), nil
}

// ErrNoReader is a FIFO that no process has open for reading.
var ErrNoReader = errors.New("it is a FIFO and nothing is reading it")

// openInPlace opens a character device or FIFO without creating or
// truncating anything. A FIFO is opened without waiting for a reader
// (ErrNoReader then). The file opened must be the one Resolve saw.
func (t Target) openInPlace() (*os.File, error) {
	flag := os.O_WRONLY
	if t.Info.Mode()&fs.ModeNamedPipe != 0 {
		flag |= syscall.O_NONBLOCK // Go's poller then waits on a full pipe
	}
	f, err := os.OpenFile(t.Name, flag, 0)
	if errors.Is(err, syscall.ENXIO) && flag&syscall.O_NONBLOCK != 0 {
		return nil, ErrNoReader
	}
	if err != nil {
		return nil, err
	}
	if err := sameFile(f, t.Info); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameFile checks that f is still the file that was looked at.
func sameFile(f *os.File, was fs.FileInfo) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, was) {
		return errors.New("it was replaced while being opened; nothing written")
	}
	return nil
}
