"""A refused agent: it waits between tries as for a missing gputop (it never
spins in the training process), keeps gputop's reason in status() and
prints it to stderr once. Against a stand-in gputop on a real Unix socket
that answers every connection with a refusal, and against the real gputop
binary refusing a hello over its line limit."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import TESTS, LineServer, child_env
from fakegpu import FakeGPU

import gputop
from gputop import _agent


def backoff_bound(secs: float) -> int:
    """The most connection attempts the backoff (50 ms doubling to 1 s)
    allows in secs, counting the first one at 0 and taking every
    connection to last no time at all."""
    n, t, b = 1, 0.0, _agent.BACKOFF_MIN_S
    while t + b <= secs:
        t, n, b = t + b, n + 1, min(2 * b, _agent.BACKOFF_MAX_S)
    return n


def wait(cond, secs: float = 5.0) -> bool:
    deadline = time.monotonic() + secs
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class Refuser:
    """A stand-in gputop that answers each connection with
    {"type":"reply","ok":false,"error":reason} and closes it; with
    read_hello, after reading the hello, else at once (the agent's hello
    then meets a closed socket). With no reason it closes each connection
    as soon as it has accepted it, saying nothing."""

    def __init__(self, path: str, reason: str | None, read_hello: bool = True) -> None:
        self.path, self.reason, self.read_hello = path, reason, read_hello
        self.count = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(64)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        reply = json.dumps({"type": "reply", "ok": False, "error": self.reason}).encode() + b"\n"
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.count += 1
            try:
                if self.read_hello and self.reason is not None:
                    c.settimeout(2)
                    buf = b""
                    while b"\n" not in buf:
                        d = c.recv(65536)
                        if not d:
                            break
                        buf += d
                if self.reason is not None:
                    c.sendall(reply)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self.srv.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def attach_for_3s(srv: "Refuser"):
    """Attach to srv for 3 s; return how many connections it saw, the time
    taken and the agent's status then."""
    try:
        FakeGPU(1).install()
        t0 = time.monotonic()
        h = gputop.attach(rate_hz=100)
        time.sleep(3)
        n = srv.count
        elapsed = time.monotonic() - t0
        st = h.status()
    finally:
        srv.close()
    return n, elapsed, st


@pytest.mark.parametrize("read_hello", [True, False], ids=["after-hello", "before-hello"])
def test_refused_agent_backs_off_and_says_why_once(sock_path: str, read_hello: bool, capsys):
    reason = "line 7: mark: \"label\" is empty"
    n, elapsed, st = attach_for_3s(Refuser(sock_path, reason, read_hello))
    # 41,915 tries in 5 s before; now the backoff's count at most
    assert 2 <= n <= backoff_bound(elapsed), f"{n} connections in {elapsed:.2f} s"
    assert st["refused"] == reason and st["last_error"] == f"refused by gputop: {reason}"
    assert st["waits_for_new_gputop"] is False
    err = capsys.readouterr().err
    assert err.count("refused this process") == 1 and reason in err, err


def test_a_connection_closed_at_once_backs_off(sock_path: str):
    # a gputop that closes every connection as soon as it accepts it (one
    # shutting down, a socket at its connection limit): each such
    # connection is a failed try, so the waits grow as for no gputop at
    # all instead of starting over at 50 ms
    n, elapsed, st = attach_for_3s(Refuser(sock_path, None))
    assert 2 <= n <= backoff_bound(elapsed), f"{n} connections in {elapsed:.2f} s"
    assert st["refused"] == ""  # nothing was said: no reason to keep


def test_a_refused_hello_waits_for_another_gputop(sock_path: str, capsys):
    # the same gputop would refuse the same hello on every try: the agent
    # stops connecting until another gputop listens at the socket
    reason = "line 1: protocol version 1 is not supported (this gputop speaks version 2)"
    srv = Refuser(sock_path, reason)
    FakeGPU(1).install()
    h = gputop.attach(rate_hz=100)
    try:
        assert wait(lambda: h.status()["waits_for_new_gputop"])
        time.sleep(2)
        assert srv.count == 1
        assert h.status()["refused"] == reason
    finally:
        srv.close()
    new = LineServer(sock_path)  # a restarted gputop that takes the agent
    try:
        assert new.wait(lambda: new.lines(0), 5)
        assert json.loads(new.lines(0)[0])["type"] == "hello"
        assert new.wait(lambda: h.status()["refused"] == "", 5)  # cleared once the connection held 1 s
        assert h.status()["connected"] and not h.status()["waits_for_new_gputop"]
    finally:
        new.close()
    err = capsys.readouterr().err
    assert err.count("refused this process") == 1
    assert "not connecting again until another gputop listens there" in err


CHILD = """
import json, sys
sys.argv = ["train.py", "x" * (2 << 20)]  # a hello over gputop's 1 MiB line limit
from fakegpu import FakeGPU
import gputop
FakeGPU(1).install()
h = gputop.attach(rate_hz=100)
print("attached", flush=True)
sys.stdin.readline()  # the test says when to report
print(json.dumps(h.status()), flush=True)
"""


class Record:
    """The real `gputop record --source agent` on sock, its stderr in log."""

    def __init__(self, binary: str, tmp: Path, sock: str, name: str) -> None:
        self.log = tmp / f"{name}.log"
        self.out = open(self.log, "w")
        self.p = subprocess.Popen([binary, "record", "-o", str(tmp / f"{name}.gputop"), "--source", "agent",
                                   "--socket", sock], stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not (os.path.exists(sock) and stat.S_ISSOCK(os.stat(sock).st_mode)):
            assert self.p.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.02)

    def refusals(self) -> int:
        return self.log.read_text().count("closed: line 1: longer than 1048576 bytes")

    def wait_refusals(self, n: int) -> None:
        deadline = time.monotonic() + 15
        while self.refusals() < n:
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.02)

    def stop(self) -> None:
        self.p.send_signal(signal.SIGINT)
        self.p.wait(20)
        self.out.close()


def test_real_gputop_refusing_an_oversized_hello(gputop_bin: str, tmp_path: Path, sock_path: str):
    rec = Record(gputop_bin, tmp_path, sock_path, "first")
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD)], cwd=str(TESTS),
                             env=child_env(GPUTOP_SOCKET=sock_path), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "attached\n"
        rec.wait_refusals(1)
        time.sleep(3)  # what the agent does after the refusal: no new try
        assert rec.refusals() == 1, f"{rec.refusals()} refusals by one gputop"
        rec.stop()
        rec2 = Record(gputop_bin, tmp_path, sock_path, "second")  # another gputop: one more try
        try:
            rec2.wait_refusals(1)
        finally:
            rec2.stop()
        out, err = child.communicate("report\n", timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    st = json.loads(out)
    assert st["connects"] == 2, st
    assert st["refused"] == "line 1: longer than 1048576 bytes" and st["waits_for_new_gputop"], st
    assert st["last_error"] == "refused by gputop: line 1: longer than 1048576 bytes", st
    # the same reason from both gputops: printed once
    assert err.count("refused this process") == 1, err
    assert "line 1: longer than 1048576 bytes" in err
