"""The kernel's fs.protected_symlinks rule, applied to the directory dumps
are written in: a symlink in a sticky world-writable directory (/tmp) is
followed only when it belongs to this process's user or to the
directory's owner, so that another user cannot plant a link where the
training job will write (``GPUTOP_DUMP_DIR=/tmp/x``, ``gputop run
--record /tmp/r`` and its ``/tmp/r.dumps``). The kernel checks only a
path's last component, and only where the rule is on; a dump directory
is a component on the way to each dump, so every link on the way is
checked here. gputop's Go side applies the same rule to its outputs
(outfile/links.go)."""

from __future__ import annotations

import errno
import os
import stat

MAX_LINKS = 40  # as the kernel (ELOOP)


class Refused(Exception):
    """A symlink the rule does not follow; the message says which and why."""


def _who(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _may_follow(link: str, st: os.stat_result, parent: str) -> None:
    d = os.stat(parent)
    if d.st_mode & (stat.S_ISVTX | stat.S_IWOTH) != (stat.S_ISVTX | stat.S_IWOTH):
        return
    euid = os.geteuid()
    if st.st_uid in (euid, d.st_uid):
        return
    raise Refused(
        f"the symlink {link} belongs to {_who(st.st_uid)} and is in {parent}, a sticky world-writable "
        f"directory owned by {_who(d.st_uid)}; running as {_who(euid)}, the agent follows a symlink there "
        "only when it is its own or the directory owner's (the kernel's fs.protected_symlinks rule), "
        "so no dump was written: remove the link or choose another GPUTOP_DUMP_DIR"
    )


def check_dir(path: str, *, missing_ok: bool) -> None:
    """Walk path as the kernel would to reach a file in it, following each
    symlink on the way (its last component's too) once the rule lets it;
    raise Refused for one it does not. A component that does not exist
    ends the walk when missing_ok (os.makedirs makes the rest, as
    directories, not links), else raises FileNotFoundError."""
    if not hasattr(os, "geteuid"):
        return  # not a POSIX system: no sticky directories
    done = "/" if path.startswith("/") else ""  # walked, no symlink left in it
    todo = path.split("/")[::-1]  # what is left to walk, next last
    links = 0
    while todo:
        elem = todo.pop()
        if elem in ("", "."):
            continue
        if elem == "..":
            # done has no symlink in it, so ".." is its parent
            if done == "":
                done = ".."
            elif done == ".." or done.endswith("/.."):
                done += "/.."
            elif done != "/":
                done = os.path.dirname(done)
            continue
        nxt = done.rstrip("/") + "/" + elem if done else elem
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        if not stat.S_ISLNK(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                return  # no link to follow; the write says what is wrong
            done = nxt
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        _may_follow(nxt, st, done or ".")
        dest = os.readlink(nxt)
        todo.extend(dest.split("/")[::-1])
        if dest.startswith("/"):
            done = "/"
