"""The agent: a daemon thread that samples the caching allocator and streams
frames to gputop over its Unix socket.

Rules it keeps, because it lives inside someone's training job:

* The user's threads only ever append to a deque and write one byte to a
  wake-up pipe (snapshot, phase, OOM). Everything else, encoding included,
  happens on the agent thread, inside try/except.
* Nothing blocks: the socket is non-blocking, at most OUT_LIMIT encoded
  bytes wait for it; beyond that, samples wait in a bounded deque that drops
  the oldest and counts the drops (sent as sample.dropped). Marks, OOMs and
  holders reports have their own deque and always go out before samples.
* No gputop listening is normal: the thread tries to connect with a backoff
  (50 ms doubling to 1 s), samples nothing meanwhile, and says hello again
  after every reconnect. A connection gputop refuses (or closes within a
  second) does not reset the backoff, so a refusal never makes it spin; a
  refusal of the hello itself waits for another gputop (_refused_for_good).

An Agent is made of its backend (_backend: the framework's devices and
counters; torch's is _torch's), its connection to gputop (_connection:
connect, send, read, refusals and the backoff) and its queues. Around it,
each in its own module: the process-wide agent, interpreter exit and fork
(_lifecycle, which makes Agents), the out-of-memory observer (_oom), the
answers to gputop's holders requests (_requests), the allocator's layout
read at its own low rate (_layout), allocation history
(_history) and memory dumps (_dumps): the thread writes the dumps
snapshot(label, dump=True) took and takes those gputop asks for, and holds
back the mark of a dump until its file is in place, so that gputop's row
names it.
"""

from __future__ import annotations

import collections
import math
import os
import select
import socket as _socket
import sys
import threading
import time
import warnings
from typing import Any, Callable

from . import _backend, _dumps, _env, _fwoom, _history, _layout, _peaklines, _requests, _wire
from ._connection import BACKOFF_MAX_S, BACKOFF_MIN_S, Connection  # noqa: F401  (the backoff's bounds, named here too)

SAMPLE_QUEUE = 1024  # samples waiting for the socket (~10 s at 100 Hz)
# Raw stats mappings kept between two sends: a tick stores what the stats
# call returned and nothing else; the counters are picked out at send time.
RAW_LIMIT = 64
MARK_QUEUE = 4096  # marks / ooms / holders waiting for the socket
OUT_LIMIT = 256 * 1024  # encoded bytes waiting for the socket
DEVICE_RECHECK_S = 1.0  # how often the set of initialised devices is re-read
# Before this process has a CUDA device there is nothing to sample: the
# thread only looks for one, this often, instead of at the sampling rate
# (it would take the GIL from CPU-bound work such as data loading).
NO_DEVICE_TICK_S = 0.1
STOP_TIMEOUT_S = 1.0  # the most detach()/exit waits to flush and say bye
DEFAULT_RATE_HZ = 100.0
MAX_RATE_HZ = 1000.0
# Samples go out in batches this far apart: one socket write per batch
# instead of one per sample keeps the agent's share of the GIL small (each
# write gives the GIL up and takes it back from the training thread).
SEND_INTERVAL_S = 0.1
# Marks wait for the next tick when ticks are this close; waking the thread
# at once would hand it the GIL in the middle of the caller's snapshot().
MARK_WAKE_AFTER_S = 0.02


class Agent:
    """Handle of the running agent, as returned by :func:`gputop.attach`.

    backend: the framework it reads (default: the process's, _backend.get());
    layout_rate: the allocator layout's readings a second (_layout: None,
    GPUTOP_LAYOUT_RATE or 1; 0 off);
    on_devices(agent, devices): called on the agent thread when it finds
    devices where it had none, before it says hello with them;
    on_detach(agent): called by detach() before the thread stops.
    """

    def __init__(self, rate_hz: float = DEFAULT_RATE_HZ, socket: str | None = None, *,
                 backend: _backend.Backend | None = None, layout_rate: float | None = None,
                 on_devices: Callable[[Agent, list[int]], None] | None = None,
                 on_detach: Callable[[Agent], None] | None = None) -> None:
        self.rate_hz = _rate(rate_hz)
        self.pid = os.getpid()
        self.backend = backend if backend is not None else _backend.get()
        self.conn = Connection(socket, self._on_connect, self._handle)
        self.layouts = _layout.Layouts(self.backend, layout_rate)
        self.samples_sent = 0
        self.marks_sent = 0
        self.dropped = 0  # samples dropped because the queue was full
        self.marks_dropped = 0
        # what current() looks at, rather than the thread's liveness (several
        # Python calls): set by detach() and by the thread as it ends
        self.stopping = False
        self._on_devices = on_devices
        self._on_detach = on_detach
        self._samples: collections.deque = collections.deque()
        self._raw: list[tuple[int, int, Any]] = []  # (t, dev, stats) since the last send
        self._marks: collections.deque = collections.deque()
        self._devs: list[int] = []  # torch's initialised devices
        # the devices the frameworks beside torch (JAX, CuPy) have initialised, with those that have
        self._fw: dict[int, list[_backend.FrameworkBackend]] = {}
        self._hello_devs: frozenset[int] | None = None
        self._hello_history: tuple[int, str] | None = None  # what the last hello said of history
        self._dump_jobs: collections.deque = collections.deque()  # marks whose dump waits to be written
        self._dump_requests: collections.deque = collections.deque()  # gputop's dump requests
        self._stopped = threading.Event()
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self._wake_r, self._wake_w = r, w
        self._thread = threading.Thread(target=self._run, name="gputop-agent", daemon=True)

    # ---- what the connection knows, as the handle shows it ----

    @property
    def socket(self) -> str | None:
        """The socket path asked for (None: the environment's)."""
        return self.conn.socket

    @property
    def connected(self) -> bool:
        return self.conn.connected

    @property
    def connects(self) -> int:
        """Connections made so far."""
        return self.conn.connects

    @property
    def last_error(self) -> str:
        return self.conn.last_error

    @property
    def refused(self) -> str:
        """gputop's reason for its latest refusal, until a connection holds."""
        return self.conn.refused

    # ---- user-thread side: cheap, never raises ----

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """The agent thread runs (it may or may not be connected)."""
        return self._thread.is_alive() and not self.stopping

    @property
    def pending_dumps(self) -> int:
        """Dumps snapshot() took that wait for the agent thread to write them."""
        return len(self._dump_jobs)

    @property
    def dumping(self) -> bool:
        """A dump the program or gputop asked for waits or is being written."""
        return bool(self._dump_jobs or self._dump_requests or _dumps.writing())

    def post(self, frame: dict[str, Any], urgent: bool = False) -> None:
        """Queue a mark / oom / holders frame and wake the agent thread."""
        try:
            if len(self._marks) >= MARK_QUEUE:
                self._marks.popleft()
                self.marks_dropped += 1
            if urgent:
                self._marks.appendleft(frame)
            else:
                self._marks.append(frame)
            if urgent or 1.0 / self.rate_hz > MARK_WAKE_AFTER_S:
                self.wake()
        except Exception:
            pass

    def post_dump(self, frame: dict[str, Any], state: Any, taken: _dumps.Taken) -> None:
        """Queue a mark whose dump (state, taken by the caller at the cost
        taken) the agent thread writes before the mark goes out."""
        try:
            job = {"state": state, "taken": taken, "frame": frame}
            frame["_dump"] = job
            self._dump_jobs.append(job)
            self.post(frame, urgent=False)
            self.wake()
        except Exception:
            pass

    def wake(self) -> None:
        """Wake the agent thread (it looks at its queues and settings)."""
        try:
            os.write(self._wake_w, b"\0")
        except OSError:
            pass  # pipe full: the thread is already due to wake

    def configure(self, rate_hz: float | None = None, socket: str | None = None,
                  layout_rate: float | None = None) -> None:
        """Change the rate, the socket or the layout's rate of a running agent."""
        if rate_hz is not None:
            self.rate_hz = _rate(rate_hz)
        if layout_rate is not None:
            self.layouts.set_rate(layout_rate)
        if socket is not None and socket != self.conn.socket:
            self.conn.socket = socket
            self._reconnect = True
        self.conn.try_refused_again()  # attach() again: try a gputop that refused for good once more
        self.wake()

    def detach(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Flush what is queued, say bye to gputop and stop the thread.

        Waits at most timeout seconds. gputop.snapshot() and friends do not
        start the agent again after this; gputop.attach() does.
        """
        if self._on_detach is not None:
            self._on_detach(self)
        self.stop(timeout)

    def stop(self, timeout: float) -> None:
        """Have the thread flush, say bye and end; wait for it at most timeout s."""
        self.stopping = True
        self.wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._stopped.wait(timeout)

    def status(self) -> dict[str, Any]:
        """Counters and state, for humans and tests."""
        return {
            "enabled": True,
            "attached": self.alive,
            "connected": self.conn.connected,
            "socket": self.conn.socket or _env.socket_path(),
            "rate_hz": self.rate_hz,
            "pid": self.pid,
            "devices": list(self._devs),
            # the frameworks beside torch the agent reads, by device
            "frameworks": {d: [fb.name for fb in fbs] for d, fbs in self._fw.items()},
            # how the tick reads the allocator: "direct" (its counters copied
            # in place), or "stats call" and why not direct
            "reading": self.backend.reading(),
            "connects": self.conn.connects,
            "samples_sent": self.samples_sent,
            "marks_sent": self.marks_sent,
            "dropped": self.dropped,
            "marks_dropped": self.marks_dropped,
            "queued_samples": len(self._samples) + len(self._raw),
            "queued_marks": len(self._marks),
            "last_error": self.conn.last_error,
            # why gputop refused this agent; "" once a connection has held
            "refused": self.conn.refused,
            # the refusal cannot change while this gputop runs: no connecting
            # until another one listens at the socket
            "waits_for_new_gputop": self.conn.waits_for_new_gputop,
            # torch's allocation history ({"max_entries": 0} when off, and
            # why, where it was asked for) and the memory dumps written
            "history": _history.status(),
            "dumps": _dumps.status(),
            # the allocator's layout readings: rate, bound, cost, skips
            "layout": self.layouts.status(),
        }

    def __repr__(self) -> str:
        state = "connected" if self.conn.connected else ("attached" if self.alive else "detached")
        return f"<gputop agent {state} {self.conn.socket or _env.socket_path()} {self.rate_hz:g} Hz>"

    def abandon(self) -> None:
        """In a forked child, which has no agent thread, only copies of the
        parent's socket and pipe: close them (a DataLoader worker holding the
        parent's socket open would hide the parent's death from gputop)."""
        self.stopping = True
        self.conn.close()
        self._close_pipe()

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # ---- agent thread ----

    _reconnect = False

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # the thread must end quietly, whatever happened
            self.conn.last_error = f"agent stopped: {e!r}"
        finally:
            # what current() looks at, rather than the thread's liveness
            # (several Python calls); set before the thread ends
            self.stopping = True
            try:
                self._finish()
            except BaseException:
                pass
            self.conn.close()
            self._close_pipe()
            self._stopped.set()

    def _loop(self) -> None:
        conn = self.conn
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        registered: int | None = None
        polled_out = False  # POLLOUT is asked for: bytes wait for the socket
        now = time.monotonic()
        next_tick = next_devcheck = next_send = conn.next_connect = now
        rate = self.rate_hz
        while not self.stopping:
            try:
                if self._dump_jobs or self._dump_requests:
                    self._run_dumps()
                now = time.monotonic()
                if self.rate_hz != rate:  # configure(): a faster rate applies at once
                    rate = self.rate_hz
                    next_tick = min(next_tick, now + 1.0 / rate)
                if self._reconnect:
                    self._reconnect = False
                    conn.reconnect(now)
                if conn.sock is None and now >= conn.next_connect:
                    if conn.connect():
                        next_tick = next_devcheck = now
                    else:
                        conn.retry_later(now)
                        if not (self._devs or self._fw):
                            # registers the OOM observer once CUDA is up,
                            # so an OOM before gputop starts is still queued
                            self._check_devices()
                if conn.sock is not None:
                    conn.held(now)
                    if now >= next_tick:
                        if now >= next_devcheck or not (self._devs or self._fw):
                            self._check_devices()
                            next_devcheck = now + DEVICE_RECHECK_S
                        self._sample()
                        next_tick += 1.0 / self.rate_hz if self._devs else max(1.0 / self.rate_hz,
                                                                               NO_DEVICE_TICK_S)
                        if next_tick <= now:  # fell behind: skip, never burst
                            next_tick = now + 1.0 / self.rate_hz
                    # not beside a dump being taken (an OOM's, in the
                    # failing thread): that moment is torch's alone
                    if self._devs and now >= self.layouts.next_at and not _dumps.taking():
                        for f in self.layouts.periodic(self._devs, now):
                            self.post(f)
                    if self._fw and now >= next_send:
                        self._read_frameworks()
                    if self._marks or now >= next_send or self.stopping:
                        self._pump()
                        next_send = now + SEND_INTERVAL_S
                # wait for the next tick, a wake-up, or the socket
                fd = conn.sock.fileno() if conn.sock is not None else None
                if fd != registered:
                    if registered is not None:
                        poller.unregister(registered)
                    registered = fd
                    if fd is not None:
                        poller.register(fd, select.POLLIN)
                        polled_out = False
                if fd is not None:
                    if polled_out != bool(conn.out):
                        polled_out = not polled_out
                        poller.modify(fd, select.POLLIN | select.POLLOUT if polled_out else select.POLLIN)
                    if not polled_out and self._devs and not self._marks:
                        next_tick = self._steady(poller, next_tick, min(next_send, next_devcheck))
                    wait = next_tick - time.monotonic()
                else:
                    wait = conn.next_connect - time.monotonic()
                for efd, ev in poller.poll(max(0, math.ceil(wait * 1000))):
                    if efd == self._wake_r:
                        self._drain_wake()
                    elif conn.sock is not None and efd == conn.sock.fileno():
                        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                            conn.read()
                        if conn.sock is not None and ev & select.POLLOUT:
                            conn.flush()
            except Exception as e:  # one bad iteration must not end the agent
                conn.last_error = f"{type(e).__name__}: {e}"
                if conn.sock is not None:
                    conn.disconnect(None)  # schedules the next try
                else:
                    conn.retry_later(time.monotonic())
        if registered is not None:
            try:
                poller.unregister(registered)
            except Exception:
                pass

    def _steady(self, poller: Any, next_tick: float, until: float) -> float:
        """Ticks until `until` (the next send or device check), a wake-up,
        or data on the socket; returns the next tick's time.

        The common case, cut to the bone: each tick holds the GIL from the
        end of one poll() to the start of the next, on caches gone cold in
        the 10 ms between, and every line run there is time the training
        thread may be waiting for the GIL. _loop() handles everything else.
        """
        period = 1.0 / self.rate_hz
        readers = self.backend.tick_readers(self._devs)
        raw = self._raw
        mono, stamp, wait = time.monotonic, time.time_ns, poller.poll
        marks = self._marks
        while True:
            ms = math.ceil((next_tick - mono()) * 1000)
            if wait(ms if ms > 0 else 0):
                return next_tick  # a wake-up or the socket: _loop() looks
            now = mono()
            if now >= until or marks or self.stopping:
                return next_tick
            for d, read in readers:
                try:
                    raw.append((stamp(), d, read()))
                except Exception:
                    pass
            next_tick += period
            if next_tick <= now:  # fell behind: skip, never burst
                next_tick = now + period

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except OSError:
            pass

    def _on_connect(self) -> None:
        """A new connection: nothing was said on it yet."""
        self._hello_devs = None
        self._check_devices()  # says hello
        if self._hello_devs is None:
            self._hello()  # the device list could not be read: hello with the last one

    def _check_devices(self) -> None:
        try:
            devs = sorted(set(self.backend.devices()))
        except Exception:
            return  # keep what we had rather than announce a flapping device list
        fw = _backend.framework_devices()
        if (devs or fw) and not (self._devs or self._fw) and self._on_devices is not None:
            try:
                self._on_devices(self, sorted(set(devs) | set(fw)))
            except Exception:
                pass
        if fw and not self._fw:
            try:
                _fwoom.install()  # JAX's and CuPy's OOMs, as they end the program
            except Exception:
                pass
        self._fw = fw
        if devs:
            try:
                _history.apply(self.backend.history())  # history asked for before CUDA was up
            except Exception:
                pass
        self._devs = devs
        try:
            self.backend.maintain(devs)
        except Exception:
            pass
        if self.conn.sock is not None and (frozenset(devs) | frozenset(fw) != self._hello_devs
                                       or (_history.on, _history.error) != self._hello_history):
            self._hello()

    def _hello(self) -> None:
        # Sent on connect and again, on the same connection, whenever the set
        # of initialised devices changes; gputop takes the newest one.
        devices = []
        for i in self._devs:
            try:
                devices.append(self.backend.info(i))
            except Exception:
                pass
        for i, fbs in sorted(self._fw.items()):
            if i not in self._devs:  # a JAX or CuPy device torch has not initialised
                try:
                    devices.append(fbs[0].info(i))
                except Exception:
                    pass
        frame = {
            "type": "hello", "v": _wire.VERSION, "pid": self.pid,
            "host": _socket.gethostname(), "argv": [str(a) for a in getattr(sys, "argv", [])],
            "torch": self.backend.version(), "python": _python_version(),
            "rate_hz": self.rate_hz, **_env.place(), "devices": devices, "t": time.time_ns(),
            "history": _history.on, "history_error": _history.error,
        }
        self.conn.out += _wire.encode(frame)
        self._hello_history = (_history.on, _history.error)
        # what was meant, not what could be described: a device whose
        # properties cannot be read must not trigger a hello every second
        self._hello_devs = frozenset(self._devs) | frozenset(self._fw)

    def _sample(self) -> None:
        # The tick wakes after 10 ms asleep, when every line of Python runs
        # several times slower than warm, with the GIL taken from the
        # training thread: it only reads (copies the counters in place, or
        # calls the stats function) and keeps what it got. _convert() does
        # the rest for the whole batch at send time.
        raw = self._raw
        for d, read in self.backend.tick_readers(self._devs):
            try:
                raw.append((time.time_ns(), d, read()))
            except Exception:
                pass
        if len(raw) >= RAW_LIMIT:
            self._convert()

    def _convert(self) -> None:
        raw, self._raw = self._raw, []
        samples = self._samples
        counters = self.backend.counters
        # the allocated bytes show the training step, which bounds a layout reading
        observe = self.layouts.observe if self.layouts.rate else None
        for t, d, stats in raw:
            try:
                c = counters(stats)
            except Exception:
                continue
            if len(samples) >= SAMPLE_QUEUE:
                samples.popleft()
                self.dropped += 1
            samples.append((t, d, c))
            if observe is not None:
                observe(t, d, c.allocated)

    def _read_frameworks(self) -> None:
        """One reading of each framework beside torch on each of its
        devices, queued as framework frames (at the send interval: a
        framework's figures are read 10 times a second, not at the tick's
        rate)."""
        t = time.time_ns()
        out = self.conn.out
        for d, fbs in self._fw.items():
            fs = _backend.read_frameworks(fbs, d)
            if fs and len(out) < OUT_LIMIT:
                try:
                    out += _wire.encode({"type": "framework", "t": t, "dev": d, "frameworks": fs})
                except Exception as e:
                    self.conn.last_error = f"bad framework frame: {e}"

    def _encode_mark(self, f: dict[str, Any]) -> bytes:
        pl = f.pop("_peaklines", None)
        if pl is not None:  # the row's history state: its interval's peak by line, here off the caller's thread
            state, since = pl
            for ds in f.get("devs", ()):
                ds["peak_lines"] = _peaklines.lines(state, ds["dev"], since.get(ds["dev"], 0), f.get("t", 0))
        return _wire.encode(f, strict=False)

    def _names_unannounced(self, f: dict[str, Any]) -> bool:
        """Whether frame f names a device the last hello did not list:
        gputop ignores such a frame, so a hello goes out before it."""
        known = self._hello_devs
        if known is None:
            return False
        if isinstance(f.get("dev"), int) and f["dev"] not in known:
            return True
        return any(ds.get("dev") not in known for ds in f.get("devs", ()) if isinstance(ds, dict))

    def _pump(self) -> None:
        if self._raw:
            self._convert()
        out = self.conn.out
        rechecked = False
        while len(out) < OUT_LIMIT:
            if self._marks:
                if "_dump" in self._marks[0]:
                    break  # its dump is still to be written: marks keep their order
                if not rechecked and self._names_unannounced(self._marks[0]):
                    # a device initialised since the last hello (an OOM can
                    # come before the tick sees it): the hello first, and
                    # the Process start row that the first device brings
                    rechecked = True
                    self._check_devices()
                    continue
                f = self._marks.popleft()
                try:
                    out += self._encode_mark(f)
                    self.marks_sent += 1
                except Exception as e:
                    self.conn.last_error = f"bad {f.get('type')} frame: {e}"
            elif self._samples:
                t, d, c = self._samples.popleft()
                out += _wire.sample_line(t, d, c, self.dropped)
                self.samples_sent += 1
            else:
                break
        self.conn.flush()

    def _handle(self, line: bytes) -> None:
        try:
            f = _wire.decode(line)
        except Exception:
            return  # gputop is the one that validates; ignore what we do not know
        if f["type"] == "request" and f.get("what") == "dump":
            self._dump_requests.append(f.get("id") if isinstance(f.get("id"), int) else 0)
        elif f["type"] == "request" and f.get("what") == "holders":
            rid = f.get("id") if isinstance(f.get("id"), int) else 0
            dev = f.get("dev")
            dev = dev if isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0 else None
            self.post(_requests.holders_frame(self.backend, rid, dev), urgent=True)
        elif f["type"] == "reply" and not f.get("ok", True):
            self.conn.note_refusal(str(f.get("error") or "no reason given"))

    def _run_dumps(self) -> None:
        """Write the dumps snapshot() took, then take those gputop asked
        for; each result goes out on its mark (wire.Dump)."""
        # each stays queued until written: dumping says so to the exit handler
        while self._dump_jobs:
            job = self._dump_jobs[0]
            f = job["frame"]
            try:
                res = _dumps.write(job["state"], f.get("label", "dump"), f.get("t", time.time_ns()), job["taken"])
            except Exception as e:
                res = {"error": f"the dump failed: {type(e).__name__}: {e}"}
            finally:
                self._dump_jobs.popleft()
            job["state"] = None
            f["dump"] = res
            f.pop("_dump", None)
        while self._dump_requests:
            t = time.time_ns()
            try:
                why = _dumps.busy()
                held_back = self.backend.snapshot_imports()
                if held_back and not why:
                    why = f"not taken from gputop's thread: {held_back} (gputop.dump() in the program takes one)"
                res = {"error": why} if why else _dumps.dump(self.backend.history(), _requests.LABEL_DUMP)
            except Exception as e:
                res = {"error": f"the dump failed: {type(e).__name__}: {e}"}
            finally:
                self._dump_requests.popleft()
            devs = []
            for d in self._devs:
                try:
                    c = self.backend.read(d)
                except Exception:
                    continue
                devs.append({"dev": d, "allocated": c.allocated, "reserved": c.reserved, "peak": c.peak})
            self.post({"type": "mark", "t": t, "label": _requests.LABEL_DUMP, "kind": "snapshot",
                       "end": False, "devs": devs, "dump": res}, urgent=True)

    def _finish(self) -> None:
        """Flush what is queued and say bye, within STOP_TIMEOUT_S (once the
        dumps the program asked for are written)."""
        try:
            self._run_dumps()
        except Exception:
            pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        conn = self.conn
        if conn.sock is None and self._marks:
            conn.connect()  # one try: marks taken before exit should land
        if conn.sock is None:
            return
        while (self._marks or self._samples or self._raw) and time.monotonic() < deadline:
            self._pump()
            if conn.sock is None:
                return
            if conn.out and not conn.wait_writable(deadline):
                return
        conn.out += _wire.encode({"type": "bye", "t": time.time_ns()})
        while conn.sock is not None and conn.out and time.monotonic() < deadline:
            conn.flush()
            if conn.out and not conn.wait_writable(deadline):
                return


def _rate(rate_hz: Any) -> float:
    try:
        r = float(rate_hz)
    except (TypeError, ValueError):
        r = math.nan
    if not (0 < r <= MAX_RATE_HZ):
        warnings.warn(f"gputop: rate_hz={rate_hz!r} is not in (0, {MAX_RATE_HZ:g}]; "
                      f"using {DEFAULT_RATE_HZ:g}", RuntimeWarning, stacklevel=3)
        r = DEFAULT_RATE_HZ
    return r


def _python_version() -> str:
    v = sys.version_info
    return f"{v.major}.{v.minor}.{v.micro}"
