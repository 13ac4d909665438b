"""Environment: the GPUTOP on/off switch and the socket path."""

from __future__ import annotations

import os
import stat

_OFF = frozenset({"0", "false", "no", "off"})


def enabled() -> bool:
    """False when GPUTOP is set to 0 / false / no / off (read at every call)."""
    return os.environ.get("GPUTOP", "").strip().lower() not in _OFF


def direct() -> bool:
    """False when GPUTOP_DIRECT is 0 / false / no / off: the agent then reads
    the allocator through torch's stats call only (see _direct)."""
    return os.environ.get("GPUTOP_DIRECT", "").strip().lower() not in _OFF


# hello field -> the environment variables that give it, first set wins
_PLACE = (
    ("rank", ("RANK",)),
    ("local_rank", ("LOCAL_RANK",)),
    ("world_size", ("WORLD_SIZE",)),
    ("job", ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")),
)


def place() -> dict[str, str]:
    """The process's place in a distributed job, for hello: RANK, LOCAL_RANK,
    WORLD_SIZE (torchrun, Slurm via torchrun, Accelerate set them) and the
    job id (TORCHELASTIC_RUN_ID, else SLURM_JOB_ID), as the environment has
    them. gputop judges the values (a RANK that is no number is left out
    there, and logged), so the agent sends them as text and never fails
    over them. Unset or empty variables are left out."""
    out = {}
    for key, names in _PLACE:
        for n in names:
            v = os.environ.get(n, "").strip()
            if v:
                out[key] = v[:256]
                break
    return out


def socket_path() -> str:
    """Where gputop listens, by the same rule as the gputop binary.

    GPUTOP_SOCKET if set, else $XDG_RUNTIME_DIR/gputop/gputop.sock, else
    /tmp/gputop-$UID/gputop.sock.
    """
    p = os.environ.get("GPUTOP_SOCKET", "")
    if p:
        return p
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg:
        return os.path.join(xdg, "gputop", "gputop.sock")
    return os.path.join("/tmp", f"gputop-{os.getuid()}", "gputop.sock")


def untrusted_dir(path: str) -> str | None:
    """Why the socket's directory must not be used, or None when it may.

    Only the shared-/tmp fallback (/tmp/gputop-$UID) is checked: another user
    could have created it first and would then read what this process sends
    (argv, memory use). A path the user chose (GPUTOP_SOCKET, socket=) or
    one under $XDG_RUNTIME_DIR is theirs to judge.
    """
    d = os.path.dirname(path)
    if d != os.path.join("/tmp", f"gputop-{os.getuid()}"):
        return None
    try:
        st = os.lstat(d)
    except OSError:
        return None  # nothing there: connect fails quietly anyway
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(d)
        except OSError:
            to = "?"
        # repr: the target is whatever was planted, escape sequences included
        return f"{d} is a symlink to {to!r}, not a directory"
    if not stat.S_ISDIR(st.st_mode):
        return f"{d} is not a directory"
    if st.st_uid != os.getuid():
        return f"{d} is owned by uid {st.st_uid}, not {os.getuid()}"
    if st.st_mode & 0o022:
        return f"{d} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None
