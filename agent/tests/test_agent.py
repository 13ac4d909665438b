"""The agent thread over a real Unix socket, against a stand-in gputop
(LineServer) so that its own rules can be checked one by one: bounded
queues, reconnection, requests, OOM, fork, exit."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest
from conftest import TESTS, LineServer, child_env
from fakegpu import FakeGPU

import gputop
from gputop import _agent, _backend, _lifecycle, _torch, _wire


def frames(lines: list[bytes]) -> list[dict]:
    return [json.loads(x) for x in lines]


def of_type(lines: list[bytes], typ: str) -> list[dict]:
    return [f for f in frames(lines) if f["type"] == typ]


# ---- queues (agent driven step by step, no thread) ----

@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch):
    gpu = FakeGPU(2)
    gpu.install()
    ag = _agent.Agent(100)
    ag._devs = [0, 1]
    a, b = socket.socketpair()
    a.setblocking(False)
    yield ag, gpu, a, b
    a.close()
    b.close()


def drain(b: socket.socket) -> list[bytes]:
    b.setblocking(False)
    out = b""
    while True:
        try:
            d = b.recv(1 << 20)
        except BlockingIOError:
            break
        if not d:
            break
        out += d
    return out.splitlines(keepends=True)


def test_sample_queue_drops_oldest_and_counts(stepped, monkeypatch):
    ag, gpu, a, b = stepped
    monkeypatch.setattr(_agent, "SAMPLE_QUEUE", 10)
    for i in range(13):  # 26 samples (2 devices), gputop not reading
        gpu.set(0, allocated=i)
        gpu.set(1, allocated=100 + i)
        ag._sample()
    ag._convert()  # what every send does first
    assert ag.dropped == 16
    assert len(ag._samples) == 10
    ag.conn.sock = a
    ag._pump()
    got = of_type(drain(b), "sample")
    # the newest 10 survive, in order, each telling how many were dropped
    assert [(f["dev"], f["allocated"]) for f in got] == \
        [(d, v + 100 * d) for v in range(8, 13) for d in (0, 1)]
    assert all(f["dropped"] == 16 for f in got)


def test_tick_keeps_the_reading_and_the_send_converts_it(stepped, monkeypatch):
    ag, gpu, a, b = stepped
    gpu.set(0, allocated=7)
    gpu.set(1, allocated=9)
    ag._sample()
    # the tick did only the stats calls; what they returned waits as it is
    assert len(ag._raw) == 2 and not ag._samples
    gpu.set(0, allocated=1000)  # changed after the tick: must not leak in
    ag.conn.sock = a
    ag._pump()
    got = of_type(drain(b), "sample")
    assert [(f["dev"], f["allocated"]) for f in got] == [(0, 7), (1, 9)]
    assert not ag._raw
    # with no send for a long while, the raw readings are converted anyway
    monkeypatch.setattr(_agent, "RAW_LIMIT", 6)
    for _ in range(3):
        ag._sample()
    assert not ag._raw and len(ag._samples) == 6


def test_steady_ticks_stop_for_a_mark_a_wakeup_or_the_deadline(stepped):
    ag, gpu, a, b = stepped
    poller = select.poll()
    poller.register(ag._wake_r, select.POLLIN)
    now = time.monotonic()
    # nothing happens: it ticks at the rate until the deadline
    nxt = ag._steady(poller, now, now + 0.1)
    assert 0.1 <= time.monotonic() - now < 0.5 and nxt > now + 0.09
    assert 8 <= len(ag._raw) <= 24, "about 10 ticks of 2 devices"
    # a mark queued without waking the thread (as at 100 Hz): the next tick sees it
    ag._marks.append({"type": "mark", "t": 1, "label": "x", "devs": []})
    now = time.monotonic()
    ag._steady(poller, now, now + 30)
    assert time.monotonic() - now < 5
    ag._marks.clear()
    # a wake-up (configure, stop, an urgent frame) ends it at once
    ag.wake()
    now = time.monotonic()
    ag._steady(poller, now + 10, now + 30)
    assert time.monotonic() - now < 5


def test_marks_go_first_and_are_not_dropped_with_samples(stepped, monkeypatch):
    ag, gpu, a, b = stepped
    monkeypatch.setattr(_agent, "SAMPLE_QUEUE", 4)
    ag._sample()
    for i in range(5):
        ag.post({"type": "mark", "t": 1, "label": f"m{i}", "kind": "snapshot", "devs": []})
    for _ in range(20):
        ag._sample()
    ag._convert()
    assert ag.marks_dropped == 0 and ag.dropped == 38
    ag.conn.sock = a
    ag._hello_devs = frozenset({0, 1})
    ag._pump()
    types_ = [f["type"] for f in frames(drain(b))]
    assert types_ == ["mark"] * 5 + ["sample"] * 4


def test_mark_queue_is_bounded_too(stepped, monkeypatch):
    ag, gpu, a, b = stepped
    monkeypatch.setattr(_agent, "MARK_QUEUE", 3)
    for i in range(5):
        ag.post({"type": "mark", "t": 1, "label": f"m{i}", "devs": []})
    assert ag.marks_dropped == 2
    assert [m["label"] for m in ag._marks] == ["m2", "m3", "m4"]


def test_pending_bytes_are_bounded(stepped, monkeypatch):
    ag, gpu, a, b = stepped
    monkeypatch.setattr(_agent, "OUT_LIMIT", 2000)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ag.conn.sock = a
    for _ in range(3000):  # nobody reads b
        ag._sample()
        ag._pump()
    assert ag.conn.sock is a, "a full socket is not an error"
    assert len(ag.conn.out) < 2000 + 200
    assert len(ag._samples) <= _agent.SAMPLE_QUEUE
    assert ag.dropped > 0


def test_bad_mark_is_skipped_not_fatal(stepped):
    ag, gpu, a, b = stepped
    ag.conn.sock = a
    ag._hello_devs = frozenset({0, 1})
    ag.post({"type": "mark", "t": "soon", "label": "x", "devs": []})
    ag.post({"type": "mark", "t": 2, "label": "ok", "devs": []})
    ag._pump()
    assert [f["label"] for f in of_type(drain(b), "mark")] == ["ok"]
    assert "bad mark frame" in ag.last_error


# ---- the real thread against a stand-in gputop ----

def test_connects_says_hello_then_streams(server: LineServer):
    gpu = FakeGPU(1)
    gpu.alloc(0, 3 << 20)
    gpu.install()
    h = gputop.attach(rate_hz=200)
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= 5)
    first = frames(server.lines(0))[0]
    assert first["type"] == "hello" and first["pid"] == os.getpid() and first["v"] == 1
    assert first["devices"] == [{"index": 0, "uuid": "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b",
                                 "name": "Fake H200", "total": 150754820096}]
    assert first["rate_hz"] == 200 and first["argv"] == sys.argv
    s = of_type(server.lines(), "sample")[-1]
    assert (s["allocated"], s["reserved"], s["peak"]) == (3 << 20, 4 << 20, 3 << 20)
    assert h.status()["connected"]


def test_one_stats_call_per_device_per_sample(server: LineServer):
    gpu = FakeGPU(3)
    gpu.install()
    h = gputop.attach(rate_hz=100)
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= 30)
    h.detach()
    assert server.wait(lambda: frames(server.lines(0))[-1]["type"] == "bye")
    sent = len(of_type(server.lines(), "sample"))
    # every stats call became a sample: nothing read twice, nothing extra
    assert gpu.calls == sent


def test_attach_is_idempotent_and_applies_new_rate(server: LineServer):
    FakeGPU(1).install()
    a = gputop.attach(rate_hz=50)
    b = gputop.attach(rate_hz=400)
    assert a is b and b.rate_hz == 400
    assert [t.name for t in threading.enumerate()].count("gputop-agent") == 1


def test_without_a_cuda_device_the_thread_only_looks_for_one(server: LineServer):
    # before CUDA is initialised there is nothing to sample: the thread must
    # not wake at the sampling rate (100/s) to find that out
    gpu = FakeGPU(1, initialised=0)
    calls = []
    devices = gpu.devices
    gpu.devices = lambda: calls.append(1) or devices()
    gpu.install()
    gputop.attach(rate_hz=100)
    assert server.wait(lambda: server.lines(0))  # connected, hello said
    time.sleep(1.0)
    assert len(calls) <= 15, f"{len(calls)} device checks in 1 s"
    gpu.initialised = 1  # CUDA comes up: sampling starts within a check
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= 5, 2.0)


def test_a_faster_rate_applies_at_once(server: LineServer):
    # from one sample a minute to 100 a second: the next sample must not wait
    # for the slow rate's next tick
    FakeGPU(1).install()
    h = gputop.attach(rate_hz=1 / 60)
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= 1)
    n = len(of_type(server.lines(), "sample"))
    h.configure(rate_hz=100)
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= n + 20, 3.0)


def test_snapshot_is_sent_at_once_with_its_values(server: LineServer):
    gpu = FakeGPU(2)
    gpu.alloc(0, 5 << 20)
    gpu.alloc(1, 1 << 20)
    gpu.install()
    gputop.attach(rate_hz=1)  # one sample a second: the mark must not wait for a tick
    assert server.wait(lambda: server.lines(0))
    vals = gputop.snapshot("Epoch 5")
    assert vals[0]["allocated"] == 5 << 20 and vals[1]["reserved"] == 2 << 20
    assert server.wait(lambda: of_type(server.lines(), "mark"), 0.5)
    m = of_type(server.lines(), "mark")[0]
    assert m["label"] == "Epoch 5" and m["kind"] == "snapshot"
    # the row's values, and its ledger (test_ledger.py) of the same bytes
    assert [{k: v for k, v in d.items() if k != "ledger"} for d in m["devs"]] == [
        {"dev": d, "allocated": vals[d]["allocated"], "reserved": vals[d]["reserved"],
         "peak": vals[d]["peak"]} for d in (0, 1)]
    assert [d["ledger"]["allocated"] for d in m["devs"]] == [vals[d]["allocated"] for d in (0, 1)]


def test_snapshot_without_attach_starts_the_agent(server: LineServer):
    FakeGPU(1).install()
    gputop.snapshot("Training start")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    assert frames(server.lines(0))[0]["type"] == "hello"


def test_empty_label_is_replaced_not_refused(server: LineServer):
    FakeGPU(1).install()
    gputop.snapshot("  ")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    assert of_type(server.lines(), "mark")[0]["label"] == "(no label)"


def test_gputop_started_later(sock_path: str):
    FakeGPU(1).install()
    h = gputop.attach(rate_hz=100)
    gputop.snapshot("before gputop")  # queued while nobody listens
    time.sleep(0.3)
    assert not h.connected and h.samples_sent == 0
    srv = LineServer(sock_path)
    try:
        assert srv.wait(lambda: of_type(srv.lines(), "mark"), 5)
        got = frames(srv.lines(0))
        assert got[0]["type"] == "hello"
        assert [f["label"] for f in got if f["type"] == "mark"] == ["before gputop"]
        assert h.connects == 1 and h.last_error == ""
    finally:
        srv.close()


def test_gputop_restarted(sock_path: str):
    FakeGPU(1).install()
    srv = LineServer(sock_path)
    h = gputop.attach(rate_hz=100)
    try:
        assert srv.wait(lambda: len(of_type(srv.lines(0), "sample")) >= 2)
    finally:
        srv.close()
    assert srv.wait(lambda: not h.connected, 3)
    srv2 = LineServer(sock_path)
    try:
        assert srv2.wait(lambda: len(of_type(srv2.lines(), "sample")) >= 2, 5)
        assert frames(srv2.lines(0))[0]["type"] == "hello"
        gputop.snapshot("after restart")
        assert srv2.wait(lambda: of_type(srv2.lines(), "mark"))
        assert h.connects == 2
    finally:
        srv2.close()


def test_refusal_reason_is_kept_and_agent_retries(server: LineServer):
    FakeGPU(1).install()
    h = gputop.attach(rate_hz=100)
    assert server.wait(lambda: server.lines(0))
    server.send(0, b'{"type":"reply","ok":false,"error":"line 9: something"}\n')
    server.socks[0].close()
    assert server.wait(lambda: len(server.conns) >= 2, 5)
    assert "line 9: something" in h.last_error


def test_device_initialised_later_says_hello_again(server: LineServer):
    gpu = FakeGPU(2, initialised=0)
    gpu.install()
    gputop.attach(rate_hz=100)
    assert server.wait(lambda: server.lines(0))
    assert frames(server.lines(0))[0]["devices"] == []
    gpu.initialised = 1  # the training code moved the model to cuda:0
    assert server.wait(lambda: len(of_type(server.lines(0), "hello")) == 2)
    gpu.initialised = 2  # and now touches cuda:1; a snapshot names it at once
    gputop.snapshot("both")
    assert server.wait(lambda: of_type(server.lines(0), "mark"))
    got = frames(server.lines(0))
    hellos = [i for i, f in enumerate(got) if f["type"] == "hello" and len(f["devices"]) == 2]
    mark = next(i for i, f in enumerate(got) if f["type"] == "mark")
    assert hellos and hellos[0] < mark, "the hello naming cuda:1 must precede the mark using it"
    assert len(server.conns) == 1, "a new device is announced on the same connection"


def test_an_oom_on_a_device_the_hello_did_not_list_goes_after_a_hello_naming_it(server: LineServer):
    # torch can fail an allocation before the agent's next device check sees
    # the device its lazy init just brought up (gputop run, CUDA up, an OOM at
    # once): gputop ignores a frame naming a device no hello listed, so the
    # hello must go first (this lost `gputop run --history`'s OOM dumps)
    gpu = FakeGPU(1, initialised=0)
    checks: list[float] = []
    devices = gpu.devices
    gpu.devices = lambda: checks.append(time.monotonic()) or devices()
    gpu.install()
    _lifecycle.watch_ooms()  # as gputop run does inside torch's init
    gputop.attach(rate_hz=1)  # with no device, the next check is 1 s away
    assert server.wait(lambda: server.lines(0))
    assert frames(server.lines(0))[0]["devices"] == []
    n = len(checks)
    assert server.wait(lambda: len(checks) > n, 2.0)  # a check has just been made
    gpu.initialised = 1
    gpu.oom(0, 1 << 30)
    assert server.wait(lambda: of_type(server.lines(0), "oom"), 2.0)
    got = frames(server.lines(0))
    oom = next(i for i, f in enumerate(got) if f["type"] == "oom")
    assert any(f["type"] == "hello" and f["devices"] for f in got[:oom]), [f["type"] for f in got]


def install_holders(monkeypatch, fn):
    mod = types.ModuleType("gputop._holders")
    if fn is not None:
        mod.holders_report = fn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop._holders", mod)
    monkeypatch.setattr(gputop, "_holders", mod, raising=False)


def test_holders_request_is_answered_on_the_agent_thread(server: LineServer, monkeypatch):
    seen = []

    def report():
        seen.append(threading.current_thread().name)
        return {"dev": 0, "total": 4002000, "skipped": 1, "took_ms": 3.25, "type": "ignored",
                "groups": [{"kind": "parameters", "name": "model", "bytes": 4002000, "tensors": 4}]}

    install_holders(monkeypatch, report)
    FakeGPU(1).install()
    gputop.attach()
    assert server.wait(lambda: server.lines(0))
    server.send(0, b'{"type":"request","what":"holders","id":5}\n')
    assert server.wait(lambda: of_type(server.lines(), "holders"))
    h = of_type(server.lines(), "holders")[0]
    assert seen == ["gputop-agent"]
    assert h["id"] == 5 and h["total"] == 4002000 and h["groups"][0]["name"] == "model"
    assert h["took_ms"] == 3.25 and h["t"] > 0


@pytest.mark.parametrize("case", ["missing", "raises", "no_function"])
def test_holders_request_without_a_report_gets_an_empty_one(server: LineServer, monkeypatch, case):
    if case == "missing":
        monkeypatch.setitem(sys.modules, "gputop._holders", None)
        monkeypatch.delattr(gputop, "_holders", raising=False)
    elif case == "raises":
        install_holders(monkeypatch, lambda: 1 / 0)
    else:
        install_holders(monkeypatch, None)
    FakeGPU(1).install()
    h = gputop.attach()
    assert server.wait(lambda: server.lines(0))
    server.send(0, b'{"type":"request","what":"holders","id":2}\n')
    assert server.wait(lambda: of_type(server.lines(), "holders"))
    assert of_type(server.lines(), "holders")[0] == {
        "type": "holders", "t": of_type(server.lines(), "holders")[0]["t"], "id": 2,
        "dev": 0, "total": 0, "skipped": 0, "groups": []}
    assert h.alive and h.connected


def test_oom_reaches_gputop_with_the_allocator_state(server: LineServer):
    gpu = FakeGPU(1)
    gpu.alloc(0, 7 << 20)
    gpu.install()
    gputop.attach()
    assert server.wait(lambda: server.lines(0))
    gpu.oom(0, 1 << 40)
    assert server.wait(lambda: of_type(server.lines(), "oom"))
    o = of_type(server.lines(), "oom")
    assert len(o) == 1
    assert o[0]["dev"] == 0 and o[0]["requested"] == 1 << 40 and o[0]["free"] == 1 << 20
    assert o[0]["limit"] == 150754820096  # the observer's third argument: the device's total here
    assert (o[0]["allocated"], o[0]["reserved"], o[0]["peak"]) == (7 << 20, 8 << 20, 7 << 20)
    assert server.wait(lambda: of_type(server.lines(), "sample")[-1].get("ooms") == 1)


def test_oom_observer_registered_once(server: LineServer):
    gpu = FakeGPU(1)
    src = gpu.install()
    h = gputop.attach()
    assert server.wait(lambda: server.lines(0))
    h.detach()
    gputop.attach()
    assert server.wait(lambda: len(server.conns) == 2 and server.lines(1))
    assert len(src.oom_callbacks) == 1


def test_oom_callback_never_raises(monkeypatch):
    gpu = FakeGPU(1)
    gpu.install()

    def boom(i):
        raise RuntimeError("CUDA error")

    monkeypatch.setattr(gpu, "stats", boom)
    gpu.install()
    gputop.attach()
    assert _lifecycle.on_oom(0, 1, 2, 3) is None
    assert _lifecycle.on_oom("x", None, None, None) is None


def test_detach_says_bye_and_snapshot_does_not_restart(server: LineServer):
    FakeGPU(1).install()
    h = gputop.attach()
    assert server.wait(lambda: server.lines(0))
    h.detach()
    assert server.wait(lambda: frames(server.lines(0))[-1]["type"] == "bye")
    assert not h.alive
    vals = gputop.snapshot("after detach")
    assert 0 in vals
    time.sleep(0.2)
    assert len(server.conns) == 1 and not of_type(server.lines(), "mark")
    assert "gputop-agent" not in [t.name for t in threading.enumerate()]
    assert gputop.status()["attached"] is False


def test_gputop_0_turns_everything_off(server: LineServer, monkeypatch, capsys):
    monkeypatch.setenv("GPUTOP", "0")
    gpu = FakeGPU(1)
    gpu.alloc(0, 1 << 20)
    gpu.install()
    h = gputop.attach()
    assert isinstance(h, gputop.Disabled) and not h.connected
    h.detach()  # harmless
    vals = gputop.snapshot("still local")
    assert vals[0]["allocated"] == 1 << 20
    row = gputop.Tracker().snapshot("tracked")
    assert row is not None and row["allocated_bytes"] == 1 << 20
    with gputop.phase("p"):
        pass
    assert gputop.cleanup(verbose=False)["before"][0]["allocated"] == 1 << 20
    time.sleep(0.2)
    assert server.conns == []
    assert "gputop-agent" not in [t.name for t in threading.enumerate()]
    assert gputop.status()["enabled"] is False
    assert "[tracked] Allocated: 1.00 MB" in capsys.readouterr().out


def run_child(code: str, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=str(TESTS),
                          capture_output=True, text=True, timeout=timeout)


def test_bye_at_interpreter_exit(server: LineServer, sock_path: str):
    r = run_child("""
        from fakegpu import FakeGPU
        import gputop
        FakeGPU(1).install()
        gputop.attach()
        gputop.snapshot("last words")
    """, child_env(GPUTOP_SOCKET=sock_path))
    assert r.returncode == 0, r.stderr
    assert server.wait(lambda: server.lines() and frames(server.lines())[-1]["type"] == "bye")
    got = frames(server.lines(0))
    assert got[0]["type"] == "hello"
    assert [f["label"] for f in got if f["type"] == "mark"] == ["last words"]


def test_exit_is_bounded_when_gputop_never_answers(tmp_path):
    # A listener that never accepts: connect succeeds into the backlog, and
    # nothing is ever read. Exit must still come promptly.
    path = str(tmp_path / "mute.sock")
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(path)
    mute.listen(1)
    try:
        t0 = time.monotonic()
        r = run_child("""
            from fakegpu import FakeGPU
            import gputop
            FakeGPU(8).install()
            gputop.attach(rate_hz=1000)
            import time; time.sleep(0.5)
            for i in range(200):
                gputop.snapshot("s%d" % i)
        """, child_env(GPUTOP_SOCKET=path))
        assert r.returncode == 0, r.stderr
        assert time.monotonic() - t0 < 10, "exit waited for a gputop that never reads"
    finally:
        mute.close()


def test_forked_child_does_not_keep_the_connection(server: LineServer, sock_path: str):
    # A DataLoader worker forked from the training process must not hold the
    # socket open, or gputop would never notice that the trainer died.
    r = run_child("""
        import os, time, sys
        from fakegpu import FakeGPU
        import gputop
        FakeGPU(1).install()
        h = gputop.attach()
        while not h.connected:
            time.sleep(0.01)
        pid = os.fork()
        if pid == 0:
            time.sleep(6)
            os._exit(0)
        print(pid, flush=True)
        os._exit(0)  # the trainer dies without bye
    """, child_env(GPUTOP_SOCKET=sock_path))
    assert r.returncode == 0, r.stderr
    worker = int(r.stdout.split()[0])
    try:
        # the connection reads EOF while the worker still lives
        closed = server.wait(lambda: _peer_closed(server), 4)
        alive = _pid_alive(worker)
        assert closed and alive
    finally:
        try:
            os.kill(worker, 9)
        except ProcessLookupError:
            pass


def _peer_closed(server: LineServer) -> bool:
    s = server.socks[0] if server.socks else None
    if s is None:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_import_and_use_without_torch(server: LineServer, sock_path: str):
    r = run_child("""
        import sys, json
        sys.modules["torch"] = None  # import torch raises ImportError
        import gputop
        out = {}
        out["cuda"] = gputop.cuda_available()
        h = gputop.attach()
        import time
        deadline = time.monotonic() + 5
        while not h.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        out["snapshot"] = gputop.snapshot("no torch")
        out["tracker"] = gputop.Tracker().snapshot("no torch")
        with gputop.phase("p"):
            pass
        out["cleanup"] = gputop.cleanup()
        out["status"] = gputop.status()
        print("RESULT " + json.dumps(out))
    """, child_env(GPUTOP_SOCKET=sock_path))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[7:])
    assert out["cuda"] is False
    assert out["snapshot"] == {} and out["tracker"] is None
    assert out["cleanup"]["released_allocated_bytes"] == 0
    assert "[no torch] CUDA not available" in r.stdout
    assert "Cleanup complete - CUDA not available" in r.stdout
    assert server.wait(lambda: server.lines())
    hello = frames(server.lines(0))[0]
    assert hello["type"] == "hello" and hello["devices"] == [] and "torch" not in hello


def test_importing_gputop_does_not_import_torch():
    r = run_child("""
        import sys, gputop
        gputop.attach
        print("torch" in sys.modules)
    """, child_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_untrusted_tmp_directory_is_refused(monkeypatch):
    from gputop import _env

    d = f"/tmp/gputop-{os.getuid()}"
    existed = os.path.isdir(d)
    if not existed:
        os.mkdir(d, 0o700)
    old = os.stat(d).st_mode & 0o777
    try:
        os.chmod(d, 0o777)
        assert "writable by others" in (_env.untrusted_dir(os.path.join(d, "gputop.sock")) or "")
        os.chmod(d, 0o700)
        assert _env.untrusted_dir(os.path.join(d, "gputop.sock")) is None
        # a path the user chose is not second-guessed
        assert _env.untrusted_dir("/tmp/mine.sock") is None
    finally:
        os.chmod(d, old)
        if not existed:
            os.rmdir(d)


def test_socket_path_rules(monkeypatch):
    from gputop import _env

    monkeypatch.setenv("GPUTOP_SOCKET", "/x/y.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert gputop.socket_path() == "/x/y.sock"
    monkeypatch.delenv("GPUTOP_SOCKET")
    assert gputop.socket_path() == "/run/user/7/gputop/gputop.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "")
    assert gputop.socket_path() == f"/tmp/gputop-{os.getuid()}/gputop.sock"
    for v, on in [("0", False), ("off", False), ("False", False), ("1", True), ("", True)]:
        monkeypatch.setenv("GPUTOP", v)
        assert _env.enabled() is on


def test_bad_rate_warns_and_uses_default(server: LineServer):
    FakeGPU(1).install()
    with pytest.warns(RuntimeWarning, match="rate_hz"):
        h = gputop.attach(rate_hz=-5)
    assert h.rate_hz == 100


def test_uuid_normalisation():
    n = _backend.normalize_uuid
    want = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
    assert n("6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b") == want
    assert n("6B8E2F1C3A4D4E5F8A9B0C1D2E3F4A5B") == want
    assert n(want) == want
    assert n(bytes.fromhex("6b8e2f1c3a4d4e5f8a9b0c1d2e3f4a5b")) == want
    import uuid

    assert n(uuid.UUID("6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b")) == want
    assert n("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee") == "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    assert n(None) == ""


def test_counters_from_nested_and_flat_stats():
    nested = FakeGPU(1)
    nested.set(0, allocated=5, peak=9, reserved=10, reserved_peak=11, inactive=5, retries=2, ooms=1)
    c = _torch.counters(nested.stats(0))
    assert c == _backend.Counters(5, 10, 9, 11, 5, 2, 1)
    flat = {"allocated_bytes.all.current": 5, "reserved_bytes.all.current": 10,
            "allocated_bytes.all.peak": 9, "reserved_bytes.all.peak": 11,
            "inactive_split_bytes.all.current": 5, "num_alloc_retries": 2, "num_ooms": 1}
    assert _torch.counters(flat) == c
    assert _torch.counters({}) == _backend.ZERO
    # nested but partial (an older torch without inactive_split_bytes)
    partial = nested.stats(0)
    del partial["inactive_split_bytes"]
    assert _torch.counters(partial) == _backend.Counters(5, 10, 9, 11, 0, 2, 1)


class _FakeTorch(types.ModuleType):
    """Just enough of torch for TorchBackend: CUDA initialised or not, and
    _cuda_memoryStats counting its calls."""

    def __init__(self, gpu: FakeGPU) -> None:
        super().__init__("torch")
        self.initialised = True
        self.calls = 0
        self.contexts = {0}
        self.__version__ = "2.11.0+fake"
        torch = self

        class _C:
            @staticmethod
            def _cuda_memoryStats(i):
                torch.calls += 1
                return gpu.stats(i)

            @staticmethod
            def _cuda_hasPrimaryContext(i):
                return i in torch.contexts

        class cuda:
            @staticmethod
            def is_initialized():
                return torch.initialised

            @staticmethod
            def device_count():
                return 2

        self._C, self.cuda = _C, cuda


def test_torch_backend_reads_the_allocator_and_devices_and_forgets_them_after_fork(monkeypatch):
    gpu = FakeGPU(1)
    gpu.set(0, allocated=7, reserved=8, peak=9)
    fake = _FakeTorch(gpu)
    monkeypatch.setitem(sys.modules, "torch", fake)
    src = _backend.install(_torch.TorchBackend())
    fake.initialised = False
    assert src.read(0) == _backend.ZERO  # never before CUDA is initialised
    assert fake.calls == 0
    fake.initialised = True
    assert src.read(0)[:3] == (7, 8, 9)
    gpu.set(0, allocated=1)
    assert src.read(0).allocated == 1  # read afresh each time
    assert fake.calls == 2
    # the device list follows contexts made later
    assert src.devices() == [0]
    fake.contexts.add(1)
    assert src.devices() == [0, 1]
    # a forked child cannot use its parent's CUDA: the backend checks again
    _backend._after_fork()
    fake.initialised = False
    assert src.read(0) == _backend.ZERO
    assert src.devices() == []
    assert fake.calls == 2


def test_wire_module_is_what_the_agent_sends(server: LineServer):
    # every line the agent sent is a frame the encoder would write
    FakeGPU(1).install()
    gputop.attach()
    gputop.snapshot("x")
    assert server.wait(lambda: of_type(server.lines(), "mark"))
    for line in server.lines(0):
        f = json.loads(line)
        assert _wire.encode(f) == line


def test_new_socket_says_bye_to_the_old_gputop(server: LineServer, tmp_path):
    FakeGPU(1).install()
    h = gputop.attach()
    assert server.wait(lambda: server.lines(0))
    other = LineServer(str(tmp_path / "o.sock"))
    try:
        assert gputop.attach(socket=other.path) is h
        assert other.wait(lambda: other.lines(0))
        assert server.wait(lambda: frames(server.lines(0))[-1]["type"] == "bye")
        assert frames(other.lines(0))[0]["type"] == "hello"
    finally:
        other.close()


def test_hello_comes_first_even_when_devices_cannot_be_read(server: LineServer, monkeypatch):
    gpu = FakeGPU(1)
    src = gpu.install()

    def broken():
        raise RuntimeError("driver hiccup")

    works = src.devices
    monkeypatch.setattr(src, "devices", broken)
    h = gputop.attach()
    assert server.wait(lambda: server.lines(0))
    assert frames(server.lines(0))[0]["type"] == "hello"
    monkeypatch.setattr(src, "devices", works)
    assert server.wait(lambda: of_type(server.lines(0), "sample"))
    assert h.connected and len(server.conns) == 1


def test_holders_call_is_sent_to_gputop(server: LineServer, monkeypatch) -> None:
    """gputop.holders() from the training code reaches an attached gputop as
    a holders frame (its h pane, a recording), the same report it returns."""
    monkeypatch.setenv("GPUTOP_HOLDERS_DEVICE", "cpu")
    torch = pytest.importorskip("torch") if not os.environ.get("CI") else __import__("torch")
    FakeGPU(1).install()
    gputop.attach()
    assert server.wait(lambda: server.lines(0))
    kept = torch.ones(1024)  # noqa: F841  (what the walk finds)
    res = gputop.holders()
    assert server.wait(lambda: of_type(server.lines(), "holders"))
    h = of_type(server.lines(), "holders")[0]
    assert h.get("id", 0) == 0 and h["t"] > 0 and h["total"] == res.total == 4096
    assert [g["name"] for g in h["groups"]] == [g.name for g in res.groups]
    assert any(g["name"].startswith("kept") for g in h["groups"]), h["groups"]


def test_holders_call_starts_no_agent(monkeypatch) -> None:
    """Without an agent running, gputop.holders() only returns its report."""
    monkeypatch.setenv("GPUTOP_HOLDERS_DEVICE", "cpu")
    monkeypatch.setattr(_lifecycle, "_current", None)
    gputop.holders()
    assert _lifecycle._current is None
