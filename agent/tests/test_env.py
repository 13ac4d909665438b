"""The socket directory as the agent judges it, in a real process with a
real symlink planted where /tmp/gputop-$UID should be."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

from conftest import TESTS, child_env

# a uid no one has, so that /tmp/gputop-UID is this test's alone
FAKE_UID = 3_999_000 + os.getpid() % 1000


def test_planted_symlink_is_reported_as_one():
    d = f"/tmp/gputop-{FAKE_UID}"
    target = tempfile.mkdtemp(prefix="gputop-elsewhere-")
    os.symlink(target, d)
    env = child_env()
    for k in ("GPUTOP_SOCKET", "XDG_RUNTIME_DIR"):  # the default path, /tmp/gputop-UID
        env.pop(k, None)
    try:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import os, time
            os.getuid = lambda: {FAKE_UID}
            from fakegpu import FakeGPU
            import gputop
            FakeGPU(1).install()
            h = gputop.attach()
            deadline = time.time() + 10
            while not h.status()["last_error"] and time.time() < deadline:
                time.sleep(0.02)
            print(h.status()["last_error"])
            h.detach()
        """)], env=env, cwd=str(TESTS), capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        want = f"not connecting to {d}/gputop.sock: {d} is a symlink to {target!r}, not a directory"
        assert r.stdout.strip() == want
    finally:
        os.unlink(d)
        os.rmdir(target)


def test_socket_path_that_is_a_regular_file_is_reported(tmp_path):
    """connect() on a regular file fails as "connection refused", as on a
    socket nobody listens on; the agent says what is there instead."""
    path = tmp_path / "gputop.sock"
    path.write_text("not a socket")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import time
        from fakegpu import FakeGPU
        import gputop
        FakeGPU(1).install()
        h = gputop.attach()
        deadline = time.time() + 10
        while not h.status()["last_error"] and time.time() < deadline:
            time.sleep(0.02)
        print(h.status()["last_error"])
        h.detach()
    """)], env=child_env(GPUTOP_SOCKET=str(path)), cwd=str(TESTS), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"connect {path}: it is a regular file, not a socket (no gputop can listen there)"
