from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

AGENT = Path(__file__).resolve().parents[1]
REPO = AGENT.parent
TESTS = AGENT / "tests"
# The first lines of a script run as its own Python (by gputop run, say):
# torch with one pretend GPU (fakegpu) in place of CUDA.
FAKE_GPU_PRELUDE = f"""\
import os, sys
sys.path.insert(0, {str(TESTS)!r})
import torch
from fakegpu import FakeGPU
gpu = FakeGPU(1)
gpu.install()
"""
if str(AGENT) not in sys.path:
    sys.path.insert(0, str(AGENT))

import gputop  # noqa: E402
from gputop import _backend, _dumps, _history, _lifecycle, _torch  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts with no agent, torch as the backend, and a socket
    path that leads nowhere unless the test sets one."""
    monkeypatch.delenv("GPUTOP", raising=False)
    monkeypatch.delenv("GPUTOP_HISTORY", raising=False)
    monkeypatch.setenv("GPUTOP_SOCKET", "/nonexistent/gputop-test.sock")
    yield
    ag = _lifecycle._current  # stopping or not: its thread must be done
    if ag is not None:
        ag.detach(timeout=2)
    _lifecycle.reset()
    _backend.install(_torch.TorchBackend())
    _history._reset()
    _dumps._reset()


# tmux: every terminal of these tests runs on a tmux server of its own
# (Tmux below). tmux's default server is the user's and every other test
# run's: it exits with its last session (failing a test whose new session
# meets it going), and a session started on a running server gets that
# server's environment, not the test's (gputop run's command then misses
# GPUTOP_AGENT_PATH). scripts/tmux-guard goes first on PATH: it refuses a
# tmux command that names no server (-L/-S) and logs it, and the fixture
# _private_tmux fails the test that ran it.
_REAL_TMUX = shutil.which("tmux")
_TMUX_GUARD = REPO / "scripts" / "tmux-guard"
_TMUX_DIR = Path(tempfile.mkdtemp(prefix="gputop-tmux-"))  # the servers' sockets, the guard's log
_TMUX_LOG = _TMUX_DIR / "guard.log"
atexit.register(shutil.rmtree, _TMUX_DIR, ignore_errors=True)
if _REAL_TMUX is not None and Path(_REAL_TMUX).parent != _TMUX_GUARD:
    os.environ["GPUTOP_TMUX_GUARD_REAL"] = _REAL_TMUX
    os.environ["GPUTOP_TMUX_GUARD_LOG"] = str(_TMUX_LOG)
    os.environ["GPUTOP_TMUX_GUARD_OUTER"] = os.environ.get("TMUX", "")
    os.environ["PATH"] = os.pathsep.join([str(_TMUX_GUARD), os.environ.get("PATH", "")])
_tmux_servers = itertools.count(1)


@pytest.fixture(autouse=True)
def _private_tmux() -> Iterator[None]:
    """Fails a test that ran tmux without a server of its own."""
    seen = _TMUX_LOG.stat().st_size if _TMUX_LOG.exists() else 0
    yield
    if _TMUX_LOG.exists() and _TMUX_LOG.stat().st_size > seen:
        with _TMUX_LOG.open() as f:
            f.seek(seen)
            pytest.fail(f"tmux ran on the default server (no -L or -S):\n{f.read()}")


class Tmux:
    """cmd in a detached width x height tmux session, on a tmux server no
    one else uses (tmux -S, its socket in a directory of this run's; no
    configuration file), started here with env (default: this process's,
    less TMUX) so that the session has exactly that environment. cmd is a
    shell command line (str) or an argv (list). close() ends the server and
    with it the session."""

    def __init__(self, cmd: str | list[str], env: dict[str, str] | None = None,
                 width: int = 160, height: int = 50) -> None:
        self.server = _TMUX_DIR / f"tmux-{next(_tmux_servers)}"
        self.env = {k: v for k, v in (os.environ if env is None else env).items()
                    if k not in ("TMUX", "TMUX_PANE")}
        argv = [cmd] if isinstance(cmd, str) else ["--", *cmd]
        r = self.tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), *argv)
        if r.returncode != 0:
            raise AssertionError(f"tmux new-session: {r.stderr}")

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-S", str(self.server), "-f", "/dev/null", *args],
                              env=self.env, capture_output=True, text=True)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t").stdout

    def wait_for(self, text: str, secs: float = 60) -> str:
        deadline = time.monotonic() + secs
        scr = ""
        while time.monotonic() < deadline:
            scr = self.screen()
            if text in scr:
                return scr
            time.sleep(0.05)
        raise AssertionError(f"screen never showed {text!r}; last screen:\n{scr}")

    def keys(self, *k: str) -> None:
        r = self.tmux("send-keys", "-t", "t", *k)
        if r.returncode != 0:
            raise AssertionError(f"tmux send-keys {k}: {r.stderr}")

    def close(self) -> None:
        self.tmux("kill-server")
        self.server.unlink(missing_ok=True)  # tmux leaves its socket behind


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(AGENT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("GPUTOP", None)
    env.update(extra)
    return env


class LineServer:
    """A listening Unix socket that records every line each connection sends
    and can send lines back: a stand-in gputop for the agent's own tests."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.conns: list[list[bytes]] = []
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(8)
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            lines: list[bytes] = []
            with self.lock:
                self.conns.append(lines)
                self.socks.append(c)
            threading.Thread(target=self._read, args=(c, lines), daemon=True).start()

    def _read(self, c: socket.socket, lines: list[bytes]) -> None:
        buf = b""
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                return
            if not d:
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self.lock:
                    lines.append(line + b"\n")

    def send(self, conn: int, line: bytes) -> None:
        self.socks[conn].sendall(line)

    def lines(self, conn: int | None = None) -> list[bytes]:
        with self.lock:
            if conn is None:
                return [x for c in self.conns for x in c]
            return list(self.conns[conn]) if conn < len(self.conns) else []

    def wait(self, cond, secs: float = 5.0) -> bool:
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(0.005)
        return bool(cond())

    def close(self) -> None:
        self.closed = True
        try:
            self.srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.srv.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


@pytest.fixture
def sock_path(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    # Unix socket paths are limited to 107 bytes: keep them short.
    d = tmp_path_factory.mktemp("s", numbered=True)
    p = str(d / "g.sock")
    if len(p) > 100:
        import tempfile

        p = os.path.join(tempfile.mkdtemp(prefix="gt"), "g.sock")
    monkeypatch.setenv("GPUTOP_SOCKET", p)
    return p


@pytest.fixture
def server(sock_path: str) -> Iterator[LineServer]:
    s = LineServer(sock_path)
    yield s
    s.close()


def find_go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.fail("the Go toolchain (go) is needed to build gputop for these tests; it is not on PATH")
    return go


@pytest.fixture(scope="session")
def gputop_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The real gputop binary, built from this checkout (or GPUTOP_BIN, a
    binary already built from it, e.g. by CI)."""
    pre = os.environ.get("GPUTOP_BIN")
    if pre:
        if not os.access(pre, os.X_OK):
            pytest.fail(f"GPUTOP_BIN={pre} is not an executable")
        return pre
    out = tmp_path_factory.mktemp("bin") / "gputop"
    env = dict(os.environ, CGO_ENABLED="1", CGO_CFLAGS="-Wno-deprecated-declarations")
    r = subprocess.run([find_go(), "build", "-o", str(out), "."], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"go build of gputop failed:\n{r.stderr}")
    return str(out)


__all__ = ["AGENT", "REPO", "TESTS", "LineServer", "Tmux", "child_env", "gputop"]
