"""The `gputop` command of the agent-only install (the py3-none-any wheel,
or `pip install ./agent`). It has no program of its own: it runs a gputop
binary found further along PATH (one built with `go install`, which this
script would otherwise hide inside an active venv), and where there is none
it says where the program comes from instead of leaving `command not found`.
The platform wheels install the real binary under this name instead."""

from __future__ import annotations

import os
import sys

MESSAGE = """\
gputop: this is the agent-only install of gputop-profiler: the Python agent
(import gputop) is here, the gputop program is not, and no other gputop
program is on PATH.
On Linux x86_64 and aarch64 with glibc 2.17 or newer, the platform wheel has it:
  pip install --force-reinstall --only-binary=:all: gputop-profiler
Elsewhere, build it from a clone with Go 1.26 and a C compiler:
  CGO_ENABLED=1 go install .   (in the repository's root; see its README)"""


def _is_program(path: str) -> bool:
    """An executable ELF file: a script (this one, another venv's) is not
    taken, so two agent-only installs on PATH never run each other."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def find_program() -> str | None:
    """The first gputop binary on PATH, or None."""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(d or ".", "gputop")
        if _is_program(candidate):
            return candidate
    return None


def main() -> int:
    """Runs the gputop binary on PATH with this command's arguments, or
    prints where the program comes from and returns exit status 1."""
    program = find_program()
    if program is not None:
        os.execv(program, [program, *sys.argv[1:]])
    print(MESSAGE, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
