package outfile

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// The kernel's fs.protected_symlinks refuses to follow a symlink in a
// sticky world-writable directory (/tmp) unless it belongs to the follower
// or to the directory's owner, so that another user cannot plant a link
// where one is about to write. The kernel checks only the last component,
// and only when it follows the link itself; Resolve reads links itself
// (to write a link's target, to rename beside it), and a directory given
// for output (--csv /tmp/dir/x.csv, a dump directory) is as open to a
// planted link. So every link on the way is checked here, by the same
// rule, whether or not the kernel has it turned on. A user's own links,
// and root's in /tmp, are followed as before.

// LinkError is a symlink that the rule refuses to follow.
type LinkError struct {
	Link     string // the symlink
	Dir      string // the sticky world-writable directory it is in
	Owner    uint32 // the link's
	DirOwner uint32
	EUID     int // this process's
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("the symlink %s belongs to %s and is in %s, a sticky world-writable directory owned by %s; "+
		"running as %s, gputop follows a symlink there only when it is its own or the directory owner's "+
		"(the kernel's fs.protected_symlinks rule): remove the link or choose another path",
		e.Link, uidName(e.Owner), e.Dir, uidName(e.DirOwner), uidName(uint32(e.EUID)))
}

// uidName is "uid N (name)", or "uid N" where the name is not known.
func uidName(uid uint32) string {
	s := "uid " + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		s += " (" + u.Username + ")"
	}
	return s
}

// mayFollow applies the rule to the symlink link (fi, from Lstat), which
// is in the directory dir.
func mayFollow(link string, fi fs.FileInfo, dir string) error {
	d, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if d.Mode()&fs.ModeSticky == 0 || d.Mode().Perm()&0o002 == 0 {
		return nil
	}
	ls, ok1 := fi.Sys().(*syscall.Stat_t)
	ds, ok2 := d.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return nil
	}
	euid := os.Geteuid()
	if ls.Uid == uint32(euid) || ls.Uid == ds.Uid {
		return nil
	}
	return &LinkError{Link: link, Dir: dir, Owner: ls.Uid, DirOwner: ds.Uid, EUID: euid}
}

// parent is the directory name is in, without cleaning: where "d" is a
// symlink, "d/../x" is not "x" (filepath.Dir would say ".").
func parent(name string) string {
	i := strings.LastIndexByte(strings.TrimRight(name, "/"), '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return name[:i]
}

// checkDir walks dir as the kernel would to reach a file in it, following
// each symlink on the way (the last component's too) once mayFollow lets
// it; links counts the links followed (the kernel's limit is 40, ELOOP).
// Every component must exist: a directory made later could be a link
// that was never checked.
func checkDir(dir string, links *int) error {
	path := dir
	done := "" // the part of path walked, with no symlink left in it
	if strings.HasPrefix(path, "/") {
		done = "/"
	}
	for start, end := 0, 0; start < len(path); start = end {
		for start < len(path) && path[start] == '/' {
			start++
		}
		end = start
		for end < len(path) && path[end] != '/' {
			end++
		}
		elem := path[start:end]
		switch elem {
		case "", ".":
			continue
		case "..":
			// done has no symlinks in it, so ".." is its parent
			switch i := strings.LastIndexByte(done, '/'); {
			case done == "":
				done = ".."
			case done == ".." || strings.HasSuffix(done, "/.."):
				done += "/.."
			case i > 0:
				done = done[:i]
			case i == 0:
				done = "/"
			default:
				done = ""
			}
			continue
		}
		in := done
		if in == "" {
			in = "."
		}
		next := elem
		if done != "" {
			next = strings.TrimSuffix(done, "/") + "/" + elem
		}
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.IsDir() {
				return &fs.PathError{Op: "lstat", Path: next, Err: syscall.ENOTDIR}
			}
			done = next
			continue
		}
		if *links++; *links > maxLinks {
			return syscall.ELOOP
		}
		if err := mayFollow(next, fi, in); err != nil {
			return err
		}
		dest, err := os.Readlink(next)
		if err != nil {
			return err
		}
		// walk the link's target, then the rest of path
		path = dest + "/" + path[end:]
		end = 0
		if strings.HasPrefix(dest, "/") {
			done = "/"
		}
	}
	return nil
}
