"""Memory dumps: the backend's dump data (History.dump_state(); torch's
is ``torch.cuda.memory._snapshot()``:
segments, blocks with the stacks that allocated them, the allocation
history) pickled as ``torch.cuda.memory._dump_snapshot`` does, so that
pytorch.org/memory_viz opens it and ``gputop dump-info`` reads it.

Where: ``$GPUTOP_DUMP_DIR``, else ``gputop-dumps/run-YYYYmmdd-HHMMSS-PID/``
under the directory the process started in (one per run). Names:
``PID-LABEL-YYYYmmdd-HHMMSS.mmm.pickle`` (the label made safe for a file
name), ``-2``, ``-3``... when that name is taken: a file is written
beside its final name, then linked there, so a reader never sees half a
dump and no file, the user's or an earlier dump, is ever replaced. A
symlink on the way that another user planted in a sticky directory such
as /tmp is not followed (``_links``: the kernel's fs.protected_symlinks
rule).

Bounds per run: at most ``GPUTOP_DUMP_MAX`` dumps (default 8) and
``GPUTOP_DUMP_MAX_BYTES`` bytes (default 4 GiB). When a new dump takes the
run past either, the oldest dumps of the run are removed until it fits;
the newest is always kept, and each removal is reported with the dump.

One dump at a time: a request while another is being written (or waits
to be) is refused with a reason, before anything is taken; an OOM's
dump, and one whose data was taken already, wait for it instead
(DUMP_WAIT_S).
Every failure (a full disk, a file-size limit, a directory that cannot be
made, torch's _snapshot() failing) is reported in the result, never raised.

The cost is measured phase by phase (``phases``, wire.DumpPhases): the
wait for a dump being written, torch's _snapshot() (its wall time and the
calling thread's CPU time in it: a wall far above the CPU is time spent
waiting, for the GIL or a lock, not torch working), the pickling, the
write, the fsync, and placing the file (its link, the run's bounds).
``took_ms`` is the whole, from the call to the file in place; ``gil_ms``
the CPU time of the thread(s) that took and pickled it, the time they held
the GIL (the write, the fsync and a wait let it go).

While a dump's data is being taken nothing of gputop's runs beside it:
a holders walk asked for meanwhile waits for it (taking(), wait_taken());
the agent thread's periodic layout reading skips that moment.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import threading
import time
from typing import Any, Callable, Iterator, NamedTuple

from . import _links
from ._backend import History

ENV_DIR = "GPUTOP_DUMP_DIR"
ENV_MAX = "GPUTOP_DUMP_MAX"
ENV_MAX_BYTES = "GPUTOP_DUMP_MAX_BYTES"
DEFAULT_MAX = 8
DEFAULT_MAX_BYTES = 4 << 30
DUMP_WAIT_S = 60.0  # an OOM's dump, or one already taken, waits this long for one being written
WRITE_CHUNK = 8 << 20  # each os.write lets the GIL go for this much
# torch's _dump_snapshot writes pickle's default protocol, 4 up to Python
# 3.13; memory_viz's reader is held to what torch writes
PROTOCOL = 4

_START_DIR = os.getcwd() if hasattr(os, "getcwd") else "."
_lock = threading.Lock()  # held while a dump is written
_writing = ""  # the path being written
_run_dir: str | None = None
_written: list[tuple[str, int]] = []  # this run's dumps, oldest first: (path, bytes)
last_error = ""
_taking = 0  # the thread taking a dump's data now (0: none)
_taken = threading.Event()  # set while no dump's data is being taken
_taken.set()


class Taken(NamedTuple):
    """What taking a dump's data cost the thread that took it: torch's
    _snapshot() wall time, the thread's CPU time in it, and the wait for
    another dump (ms)."""

    ms: float
    cpu_ms: float
    wait_ms: float = 0.0
    import_ms: float = 0.0  # before it: importing what the snapshot needs (History.prepare)
    import_cpu_ms: float = 0.0


def taking() -> int:
    """The thread taking a dump's data now, or at an OOM writing it in the
    failing thread (its ident); 0 when none is."""
    return _taking


def wait_taken(timeout: float) -> bool:
    """Wait until no dump's data is being taken (at most timeout s); True
    when none is."""
    return _taken.wait(timeout)


@contextlib.contextmanager
def _taking_here() -> Iterator[None]:
    """taking() names this thread meanwhile (nested: the outermost ends it)."""
    global _taking
    me = threading.get_ident()
    if _taking == me:
        yield
        return
    _taken.clear()
    _taking = me
    try:
        yield
    finally:
        if _taking == me:
            _taking = 0
            _taken.set()


def directory() -> str:
    """Where this run's dumps go."""
    global _run_dir
    d = os.environ.get(ENV_DIR, "").strip()
    if d:
        return d
    if _run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        _run_dir = os.path.join(_START_DIR, "gputop-dumps", f"run-{stamp}-{os.getpid()}")
    return _run_dir


def _limit(env: str, default: int) -> int:
    try:
        n = int(os.environ.get(env, "").strip() or default)
    except ValueError:
        return default
    return n if n > 0 else default


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(pid: int, label: str, t_ns: int) -> str:
    """PID-LABEL-YYYYmmdd-HHMMSS.mmm.pickle, the label made safe."""
    safe = _UNSAFE.sub("_", label).strip("._-")[:48] or "dump"
    lt = time.localtime(t_ns // 1_000_000_000)
    ms = (t_ns // 1_000_000) % 1000
    return f"{pid}-{safe}-{time.strftime('%Y%m%d-%H%M%S', lt)}.{ms:03d}.pickle"


def take(hist: History | None) -> tuple[Any, Taken]:
    """The backend's dump data (torch's _snapshot()) and what taking it
    cost; taking() names this thread meanwhile."""
    if hist is None:
        raise RuntimeError("CUDA is not initialised in this process")
    with _taking_here():
        c0, t0 = time.thread_time(), time.perf_counter()
        imported = hist.prepare()
        c1, t1 = time.thread_time(), time.perf_counter()
        state = hist.dump_state()
        return state, Taken((time.perf_counter() - t1) * 1e3, (time.thread_time() - c1) * 1e3,
                            import_ms=(t1 - t0) * 1e3 if imported else 0.0,
                            import_cpu_ms=(c1 - c0) * 1e3 if imported else 0.0)


def dump(hist: History | None, label: str, *, wait: float = 0.0,
         seen: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Take a dump here and now and write it (wire.Dump); seen, when
    given, is handed the dump's data once taken."""
    if hist is None:
        return {"error": "CUDA is not initialised in this process: nothing to dump"}
    t = time.time_ns()
    t0 = time.perf_counter()
    got = _lock.acquire(timeout=wait) if wait > 0 else _lock.acquire(blocking=False)
    if not got:
        return _busy()
    try:
        waited = (time.perf_counter() - t0) * 1e3
        with _taking_here():  # taken and written here: nothing of gputop's beside it
            try:
                state, taken = take(hist)
            except Exception as e:
                return _failed(f"torch.cuda.memory._snapshot() failed: {type(e).__name__}: {e}")
            if seen is not None:
                seen(state)
            return _write(state, label, t, taken._replace(wait_ms=waited))
    finally:
        _lock.release()


def write(state: Any, label: str, t_ns: int, taken: Taken | float, *,
          wait: float = DUMP_WAIT_S) -> dict[str, Any]:
    """Write dump data taken earlier (at t_ns, at the cost taken: a Taken,
    or its wall ms) (wire.Dump), after the one being written, if any (up
    to wait seconds)."""
    if not isinstance(taken, Taken):
        taken = Taken(float(taken), float(taken))
    t0 = time.perf_counter()
    if not _lock.acquire(timeout=wait):
        return _busy()
    try:
        return _write(state, label, t_ns, taken._replace(wait_ms=taken.wait_ms + (time.perf_counter() - t0) * 1e3))
    finally:
        _lock.release()


def writing() -> str:
    """The dump being written now ("" when none is)."""
    return _writing


def busy(pending: int = 0) -> str:
    """Why a new dump is refused now ("" when it is not): one is being
    written, or pending more wait for the agent thread."""
    if _lock.locked():
        return f"a dump is being written ({_writing or 'starting'}); this one was not taken"
    if pending:
        return "a dump is waiting to be written; this one was not taken"
    return ""


def _busy() -> dict[str, Any]:
    return _failed(busy() or "a dump is being written; this one was not taken")


def _failed(why: str) -> dict[str, Any]:
    global last_error
    last_error = why
    return {"error": why}


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1e3


def _write(state: Any, label: str, t_ns: int, taken: Taken) -> dict[str, Any]:
    global _writing, last_error
    d = directory()
    name = file_name(os.getpid(), label, t_ns)
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    try:
        c0, tp = time.thread_time(), time.perf_counter()
        data = pickle.dumps(state, protocol=PROTOCOL)
        pickle_ms, pickle_cpu = _ms(tp), (time.thread_time() - c0) * 1e3
    except Exception as e:
        return _failed(f"the dump could not be pickled: {type(e).__name__}: {e}")
    write_ms = fsync_ms = 0.0
    fd = -1
    _writing = os.path.join(d, name)
    try:
        tw = time.perf_counter()
        # links checked before makedirs (which would make directories
        # through one) and after (one planted meanwhile); what passed then
        # stays: in a sticky directory only its owner can move it
        _links.check_dir(d, missing_ok=True)
        os.makedirs(d, mode=0o700, exist_ok=True)
        _links.check_dir(d, missing_ok=False)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        view = memoryview(data)
        while view:
            n = os.write(fd, view[:WRITE_CHUNK])
            view = view[n:]
        write_ms, tw = _ms(tw), time.perf_counter()
        os.fsync(fd)
        os.close(fd)
        fd = -1
        fsync_ms, tw = _ms(tw), time.perf_counter()
        path = _place(tmp, d, name)
    except _links.Refused as e:
        return _failed(str(e))
    except OSError as e:
        where = e.filename or tmp
        return _failed(f"{where}: {e.strerror or e}")
    finally:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _writing = ""
    del data
    out: dict[str, Any] = {"path": os.path.abspath(path), "bytes": os.path.getsize(path)}
    removed = _keep_within(out["path"], out["bytes"])
    if removed:
        out["removed"] = removed
    phases = {"wait_ms": taken.wait_ms, "import_ms": taken.import_ms, "take_ms": taken.ms,
              "take_cpu_ms": taken.cpu_ms, "pickle_ms": pickle_ms, "write_ms": write_ms,
              "fsync_ms": fsync_ms, "place_ms": _ms(tw)}
    # took_ms: the phases in order, so that they add up to it
    out["took_ms"] = round(sum(v for k, v in phases.items() if k != "take_cpu_ms"), 3)
    out["gil_ms"] = round(taken.import_cpu_ms + taken.cpu_ms + pickle_cpu, 3)
    out["phases"] = {k: round(v, 3) for k, v in phases.items() if k != "import_ms" or v > 0}
    last_error = ""
    return out


def _place(tmp: str, d: str, name: str) -> str:
    """Link the finished temporary file under name (name-2, name-3... when
    taken); a link never replaces a file."""
    stem = name[: -len(".pickle")]
    for i in range(1, 1000):
        path = os.path.join(d, name if i == 1 else f"{stem}-{i}.pickle")
        try:
            os.link(tmp, path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV):
                raise
            # no hard links here: claim the name, then move over the claim
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                continue
            os.replace(tmp, path)
            return path
    raise FileExistsError(errno.EEXIST, "999 dumps of this name exist", os.path.join(d, name))


def _keep_within(path: str, size: int) -> list[str]:
    """Record a new dump and remove the run's oldest past the bounds."""
    _written.append((path, size))
    most, most_bytes = _limit(ENV_MAX, DEFAULT_MAX), _limit(ENV_MAX_BYTES, DEFAULT_MAX_BYTES)
    removed = []
    while len(_written) > 1 and (len(_written) > most or sum(s for _, s in _written) > most_bytes):
        old, _ = _written.pop(0)
        try:
            os.unlink(old)
            removed.append(old)
        except FileNotFoundError:
            pass  # already gone (the user moved it): nothing to count
        except OSError:
            pass
    return removed


def status() -> dict[str, Any]:
    """What status() says of dumps."""
    d: dict[str, Any] = {"dir": directory(), "written": [p for p, _ in _written],
                         "bytes": sum(s for _, s in _written)}
    if _writing:
        d["writing"] = _writing
    if last_error:
        d["last_error"] = last_error
    return d


def _reset() -> None:
    """Forget this run's dumps (tests; a forked child, whose run is its own:
    it must not remove its parent's dumps, nor wait for a lock the parent's
    agent thread held at the fork)."""
    global _lock, _run_dir, last_error, _writing, _taking, _taken
    _lock = threading.Lock()
    _taking = 0
    _taken = threading.Event()
    _taken.set()
    _written.clear()
    _run_dir = None
    last_error = _writing = ""


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset)
