package outfile

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Write writes what fill writes to path, the whole of it at once.
//
// A regular file, new or existing, is replaced atomically: fill writes a
// temporary file beside it (beside the target, for a symlink), which is
// synced and renamed over it, so a reader never sees half a file and a
// failed write leaves the old file as it was. A new file gets 0666 less the
// umask and is never put over a file that appeared meanwhile; an existing
// one keeps its mode (and, where the process may, its owner). An existing
// file with other names (hard links), or in a directory where no file can
// be made, is truncated and written in place instead, as `> FILE` would.
// A character device, a FIFO (which must have a reader: ErrNoReader) or a
// descriptor is written in place. Errors are *Error and name path.
func Write(path string, fill func(io.Writer) error) error {
	t, err := Resolve(path)
	if err != nil {
		return err
	}
	var f *os.File
	switch t.Kind {
	case New, Regular:
		return t.replace(fill)
	case Descriptor:
		f, err = t.file()
	default:
		f, err = t.openInPlace()
	}
	if err != nil {
		return t.fail(err)
	}
	werr := fill(f)
	var cerr error
	if f != os.Stdout && f != os.Stderr {
		cerr = f.Close()
	}
	if werr != nil {
		return t.fail(werr)
	}
	if cerr != nil {
		return t.fail(cerr)
	}
	return nil
}

func (t Target) replace(fill func(io.Writer) error) (err error) {
	if t.Kind == Regular && hardLinks(t.Info) > 1 {
		// a rename would give this one name a new file and leave the
		// file's other names with the old content; `> FILE` writes the
		// file that all of them name
		return t.overwrite(fill)
	}
	dir := parent(t.Name)
	tmp, err := createTemp(dir, filepath.Base(t.Name))
	if t.Kind == Regular && errors.Is(err, fs.ErrPermission) {
		// no new file can be made in the directory, so nothing can be
		// renamed over this one; the file itself may be writable (a
		// shared CSV in someone else's directory), and `> FILE` would
		// write it: so does this, and says so when it cannot either
		return t.overwrite(fill)
	}
	if err != nil {
		return t.fail(err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if t.Kind == Regular {
		if st, ok := t.Info.Sys().(*syscall.Stat_t); ok {
			_ = tmp.Chown(int(st.Uid), int(st.Gid)) // only root may give a file away; best effort
		}
		// after Chown, which clears set-id bits
		if err = tmp.Chmod(t.Info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
			return t.fail(err)
		}
	}
	if err = fill(tmp); err != nil {
		return t.fail(err)
	}
	if err = tmp.Sync(); err != nil {
		return t.fail(err)
	}
	if err = tmp.Close(); err != nil {
		return t.fail(err)
	}
	if t.Kind == New {
		// a hard link fails where a name exists; rename would replace it
		err = os.Link(tmp.Name(), t.Name)
		if errors.Is(err, fs.ErrExist) {
			return t.fail(errors.New("a file appeared there while it was being written; it is left as it is"))
		}
		if err == nil {
			os.Remove(tmp.Name())
		} else if err = os.Rename(tmp.Name(), t.Name); err != nil { // a file system without hard links
			return t.fail(err)
		}
	} else {
		if fi, lerr := os.Lstat(t.Name); lerr != nil || !os.SameFile(fi, t.Info) {
			return t.fail(errors.New("it was replaced while it was being written; it is left as it is"))
		}
		if err = os.Rename(tmp.Name(), t.Name); err != nil {
			return t.fail(err)
		}
	}
	syncDir(dir)
	return nil
}

// overwrite writes an existing regular file where it is, as `> FILE`
// does: it keeps the file (its other names, owner and mode) but is not
// atomic, so a failed fill leaves it part written.
func (t Target) overwrite(fill func(io.Writer) error) error {
	// O_NOFOLLOW: Resolve followed the links there were; one put there
	// since is not followed
	f, err := os.OpenFile(t.Name, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return t.fail(err)
	}
	err = sameFile(f, t.Info)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = fill(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.fail(err)
	}
	return nil
}

// hardLinks is how many names the file has.
func hardLinks(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// createTemp creates a new file in dir for Write. Its mode is 0666, so the
// kernel applies the umask, as it does for `> FILE`.
func createTemp(dir, base string) (*os.File, error) {
	for {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// syncDir makes a rename durable; best effort (some file systems refuse).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
