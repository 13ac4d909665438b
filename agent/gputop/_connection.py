"""The agent's connection to gputop: connecting (with the backoff, 50 ms
doubling to 1 s, and not at all while a gputop that refused this process
for good still listens at the socket), sending what the agent encoded,
reading gputop's lines, and what a refusal leaves: its reason kept and
printed once, the backoff not reset. All of it runs on the agent thread,
on a non-blocking socket; the agent owns one Connection.
"""

from __future__ import annotations

import os
import select
import socket as _socket
import stat
import sys
import time
from typing import Any, Callable

from . import _env, _wire

BACKOFF_MIN_S, BACKOFF_MAX_S = 0.05, 1.0

_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0)


class Connection:
    """The agent's socket to gputop and what waits on it.

    The agent writes encoded frames into out; on_connect() is called once
    a new connection is up (the agent says hello in it), on_line(line) for
    each line gputop sends.
    """

    def __init__(self, socket: str | None, on_connect: Callable[[], None],
                 on_line: Callable[[bytes], None]) -> None:
        self.socket = socket  # None: resolved from the environment at each connect
        self.sock: _socket.socket | None = None
        self.out = bytearray()  # encoded frames waiting for the socket
        self.connected = False
        self.connects = 0
        self.last_error = ""
        self.refused = ""  # gputop's reason for the latest refusal, until a connection holds
        self.next_connect = 0.0  # monotonic time of the next try
        self._on_connect = on_connect
        self._on_line = on_line
        self._in = bytearray()
        self._refusal: str | None = None  # the reason gputop gave on this connection
        self._told: set[str] = set()  # refusal reasons already printed to stderr
        self._final: tuple[str, Any] | None = None  # (path, socket file) that refused for good
        self._path = ""
        self._connected_at = 0.0
        self._backoff = BACKOFF_MIN_S

    @property
    def waits_for_new_gputop(self) -> bool:
        """The refusal cannot change while this gputop runs: no connecting
        until another one listens at the socket."""
        return self._final is not None

    def note_refusal(self, reason: str) -> None:
        """gputop refused this connection (a reply with ok false): the
        reason stands once it closes."""
        self._refusal = reason

    def try_refused_again(self) -> None:
        """attach() again: try a gputop that refused for good once more."""
        self._final = None

    def held(self, now: float) -> None:
        """A connection that has held BACKOFF_MAX_S: gputop took us, so
        its earlier refusal no longer stands."""
        if self.refused and now - self._connected_at >= BACKOFF_MAX_S:
            self.refused = ""

    def reconnect(self, now: float) -> None:
        """The socket changed: bye to the old gputop (it must not think we
        died), then connect to the new one at once."""
        self.bye_now()
        self.disconnect(None)
        self.next_connect = now

    def retry_later(self, now: float) -> None:
        """A try failed: the next one after the backoff, which doubles."""
        self.next_connect = now + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    def connect(self) -> bool:
        """Connect to gputop's socket: True once connected, hello said."""
        path = self.socket or _env.socket_path()
        if self._final is not None:
            if self._final == (path, _socket_file(path)):
                return False  # the gputop that refused us for good still listens
            self._final = None
        why = _env.untrusted_dir(path)
        if why:
            self.last_error = f"not connecting to {path}: {why}"
            return False
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(0.5)
            s.connect(path)
            s.setblocking(False)
        except OSError as e:
            s.close()
            # nothing there, or a socket nobody listens on: gputop is not
            # running yet, which is no error; anything else at the path
            # (connect says "refused" for a file too) is one
            kind = _not_a_socket(path) if isinstance(e, ConnectionRefusedError) else None
            if kind:
                self.last_error = f"connect {path}: it is {kind}, not a socket (no gputop can listen there)"
            elif not isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
                self.last_error = f"connect {path}: {e}"
            return False
        self.sock = s
        self._path = path
        self._connected_at = time.monotonic()
        self._refusal = None
        self.out.clear()
        self._in.clear()
        self.connects += 1
        self._on_connect()  # says hello: nothing was said on this connection yet
        self.connected = True
        return True

    def disconnect(self, why: str | None) -> None:
        """End the connection and schedule the next try."""
        had = self.sock is not None
        if had:
            self._read_last()  # gputop's reply before it closed: a refusal's reason
        refusal, self._refusal = self._refusal, None
        if refusal is not None:
            why = f"refused by gputop: {refusal}"
        if why:
            self.last_error = why
        self.close()
        if not had:
            return
        now = time.monotonic()
        if refusal is not None:
            self.refused = refusal
            if _refused_for_good(refusal):
                self._final = (self._path, _socket_file(self._path))
            self._tell(refusal)
        elif now - self._connected_at >= BACKOFF_MAX_S:
            # a connection that held: gputop went away (restarted), so come
            # back soon; one it closed at once counts as a failed try
            self._backoff = BACKOFF_MIN_S
        self.retry_later(now)

    def _read_last(self) -> None:
        """Read what gputop sent before the connection broke: a send that
        fails (gputop closed while a hello was on its way) comes before the
        reply with the reason is read."""
        s = self.sock
        try:
            while s is not None and len(self._in) <= _wire.MAX_FRAME_BYTES:
                data = s.recv(65536)
                if not data:
                    break
                self._in += data
        except OSError:
            pass  # nothing more (EAGAIN) or the reset itself
        self._handle_lines()

    def _tell(self, refusal: str) -> None:
        """Print a refusal's reason to stderr, once per distinct reason."""
        if refusal in self._told or len(self._told) >= 32:
            return
        self._told.add(refusal)
        then = ("not connecting again until another gputop listens there" if self._final is not None
                else "retrying with the backoff (50 ms doubling to 1 s)")
        try:
            sys.stderr.write(f"gputop agent: gputop at {_printable(self._path)} refused this process: "
                             f"{_printable(refusal)}; {then}\n")
            sys.stderr.flush()
        except Exception:
            pass

    def close(self) -> None:
        """Drop the socket and what waits on it (no bye)."""
        s, self.sock = self.sock, None
        self.connected = False
        # A partly written frame cannot be finished on a new connection.
        self.out.clear()
        self._in.clear()
        if s is not None:
            try:
                s.close()
            except OSError:
                pass

    def flush(self) -> None:
        """Send what the socket takes now."""
        s = self.sock
        while s is not None and self.out:
            try:
                n = s.send(self.out, _NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.disconnect(f"gputop went away: {e.strerror or e}")
                return
            del self.out[:n]

    def read(self) -> None:
        """Read what gputop sent and handle its whole lines."""
        s = self.sock
        if s is None:
            return
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.disconnect(f"gputop went away: {e.strerror or e}")
            return
        if not data:
            self.disconnect("gputop closed the connection")
            return
        self._in += data
        self._handle_lines()
        if len(self._in) > _wire.MAX_FRAME_BYTES:
            self.disconnect("line from gputop exceeds 1 MiB")

    def _handle_lines(self) -> None:
        """Handle every whole line received so far."""
        while True:
            i = self._in.find(b"\n")
            if i < 0:
                return
            line = bytes(self._in[:i])
            del self._in[: i + 1]
            self._on_line(line)

    def wait_writable(self, deadline: float) -> bool:
        """Wait until the socket takes more, at most until deadline."""
        s = self.sock
        if s is None:
            return False
        p = select.poll()
        p.register(s.fileno(), select.POLLOUT)
        left = deadline - time.monotonic()
        return left > 0 and bool(p.poll(max(1, int(left * 1000))))

    def bye_now(self) -> None:
        """Say bye without waiting: whatever the socket takes at once."""
        if self.sock is not None:
            try:
                self.out += _wire.encode({"type": "bye", "t": time.time_ns()})
                self.flush()
            except Exception:
                pass


def _refused_for_good(refusal: str) -> bool:
    """A refusal that the same gputop will repeat to every try of this
    process: its hello refused (line 1: the protocol version, the hello's
    size or content, all the same on the next connection) or its uid."""
    return refusal.startswith(("line 1:", "peer uid "))


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_a_socket(path: str) -> str | None:
    """What is at path when it is something other than a socket (followed
    through symlinks, as connect does), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a socket")


def _socket_file(path: str) -> Any:
    """What tells one gputop's socket from the next one's at the same path."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _printable(s: str, limit: int = 300) -> str:
    """Text from gputop made safe for the process's stderr (a terminal)."""
    return "".join(c if c.isprintable() else "\ufffd" for c in s[:limit])
