"""Notebook magics, registered by ``%load_ext gputop``:

    %gputop [--rate HZ] [--socket PATH] [--history N] [--cells | --no-cells] [--detach]
        attach the agent (prints where it streams); --cells takes a snapshot
        "cell N" after every executed cell, so gputop shows which cell took
        the memory
    %gpusnap LABEL       a labelled snapshot (printed, and sent to gputop)
    %gpuholders [--device DEV] [--top N] [--collect]
        the holders table: what keeps the device's memory alive
    %gpucleanup [--keep-history] [--keep-traceback]
        drop the output-history entries (Out[N], _N, _, __, ___) that are or
        contain device tensors, and the stored exception when its frames
        hold some, then gputop.cleanup(); everything else in the history
        stays

IPython is imported only by IPython itself: this module needs nothing
beyond the standard library until a magic runs. The device the history
and traceback checks look for is $GPUTOP_HOLDERS_DEVICE (a test/debug
knob, e.g. ``cpu``), else CUDA.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import Any, Callable

from . import _holders

_MAGICS = ("gputop", "gpusnap", "gpuholders", "gpucleanup")
_cell_hooks: dict[int, Callable[..., None]] = {}  # id(shell) -> post_run_cell callback


def load_ipython_extension(ip: Any) -> None:
    """Register %gputop, %gpusnap, %gpuholders and %gpucleanup on ip."""
    table: dict[str, Callable[[Any, str], None]] = {
        "gputop": gputop_magic,
        "gpusnap": gpusnap_magic,
        "gpuholders": gpuholders_magic,
        "gpucleanup": gpucleanup_magic,
    }
    for name, fn in table.items():
        ip.register_magic_function(_bind(fn, ip), "line", name)


def unload_ipython_extension(ip: Any) -> None:
    """Remove the magics and the per-cell snapshot hook."""
    _cells_off(ip)
    try:
        line = ip.magics_manager.magics.get("line", {})
        for name in _MAGICS:
            line.pop(name, None)
    except Exception:
        pass


def _bind(fn: Callable[[Any, str], None], ip: Any) -> Callable[[str], None]:
    def magic(line: str = "") -> None:
        fn(ip, line)

    magic.__name__ = fn.__name__
    magic.__doc__ = fn.__doc__
    return magic


class _Args:
    """A small flag parser: argparse would exit the kernel's cell on bad input."""

    def __init__(self, magic: str, line: str, flags: set[str], options: set[str]) -> None:
        try:
            toks = shlex.split(line)
        except ValueError as e:
            raise _usage(magic, f"cannot parse {line!r}: {e}") from None
        self.flags: set[str] = set()
        self.opts: dict[str, str] = {}
        self.rest: list[str] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            key, eq, val = t.partition("=")
            if key in options:
                if not eq:
                    i += 1
                    if i >= len(toks):
                        raise _usage(magic, f"{key} needs a value")
                    val = toks[i]
                self.opts[key] = val
            elif t in flags:
                self.flags.add(t)
            elif t.startswith("--"):
                raise _usage(magic, f"unknown option {t}")
            else:
                self.rest.append(t)
            i += 1

    def number(self, magic: str, key: str, kind: type = float) -> Any:
        v = self.opts.get(key)
        if v is None:
            return None
        try:
            return kind(v)
        except ValueError:
            raise _usage(magic, f"{key} wants a number, not {v!r}") from None


def _usage(magic: str, why: str) -> Exception:
    try:
        from IPython.core.error import UsageError
        return UsageError(f"%{magic}: {why}")
    except Exception:
        return ValueError(f"%{magic}: {why}")


def _mib(n: Any) -> str:
    try:
        return _holders.format_bytes(int(n))
    except Exception:
        return "?"


# ---- %gputop ----

def gputop_magic(ip: Any, line: str) -> None:
    """%gputop [--rate HZ] [--socket PATH] [--history N] [--cells | --no-cells] [--detach]:
    attach the agent and print where it streams; --history N records
    torch's allocation history (max_entries N; 0 turns it off)."""
    a = _Args("gputop", line, {"--cells", "--no-cells", "--detach"}, {"--rate", "--socket", "--history"})
    if a.rest:
        raise _usage("gputop", f"unexpected {' '.join(a.rest)!r}")
    import gputop

    if "--detach" in a.flags:
        _cells_off(ip)
        gputop.detach()
        print("gputop: agent detached")
        return
    rate = a.number("gputop", "--rate")
    kw: dict[str, Any] = {}
    if rate is not None:
        kw["rate_hz"] = rate
    if "--socket" in a.opts:
        kw["socket"] = a.opts["--socket"]
    history = a.number("gputop", "--history", int)
    if history is not None:
        if history < 0:
            raise _usage("gputop", f"--history wants a number of entries >= 0, not {history}")
        kw["history"] = history
    ag = gputop.attach(**kw)
    st: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 0.5  # the agent connects on its own thread
        st = ag.status()
        while st.get("attached") and not st.get("connected") and time.monotonic() < deadline:
            time.sleep(0.05)
            st = ag.status()
    except Exception as e:
        st = {"last_error": str(e)}
    sock = st.get("socket") or kw.get("socket") or "?"
    if not st.get("attached"):
        print(f"gputop: agent off ({st.get('last_error') or 'not started'}); "
              f"nothing is streamed")
    elif st.get("connected"):
        print(f"gputop: attached pid {os.getpid()} at {st.get('rate_hz', rate) or 100:g} Hz, "
              f"streaming to {sock}")
    else:
        why = f" ({st['last_error']})" if st.get("last_error") else ""
        print(f"gputop: attached pid {os.getpid()}; gputop is not listening on {sock} yet"
              f"{why}: the agent connects when it starts")
    h = st.get("history") or {}
    if h.get("max_entries"):
        print(f"gputop: recording torch's allocation history (max_entries {h['max_entries']})")
    elif h.get("error"):
        print(f"gputop: no allocation history: {h['error']}")
    elif h.get("asked"):
        print("gputop: allocation history turns on when this process initialises CUDA")
    if "--cells" in a.flags:
        _cells_on(ip)
        print('gputop: a snapshot "cell N" follows every executed cell (%gputop --no-cells stops it)')
    elif "--no-cells" in a.flags:
        _cells_off(ip)
        print("gputop: per-cell snapshots off")


def _cells_on(ip: Any) -> None:
    if id(ip) in _cell_hooks:
        return

    def after_cell(result: Any = None) -> None:
        try:
            n = getattr(result, "execution_count", None)
            if n is None:
                n = getattr(ip, "execution_count", "?")
            import gputop

            gputop.snapshot(f"cell {n}")
        except Exception:
            pass  # a snapshot must never break the notebook

    ip.events.register("post_run_cell", after_cell)
    _cell_hooks[id(ip)] = after_cell


def _cells_off(ip: Any) -> None:
    cb = _cell_hooks.pop(id(ip), None)
    if cb is None:
        return
    try:
        ip.events.unregister("post_run_cell", cb)
    except Exception:
        pass


# ---- %gpusnap ----

def gpusnap_magic(ip: Any, line: str) -> None:
    """%gpusnap LABEL: a labelled snapshot, printed and sent to gputop."""
    label = line.strip()
    if len(label) >= 2 and label[0] == label[-1] and label[0] in "'\"":
        label = label[1:-1]
    if not label.strip():
        raise _usage("gpusnap", "a label is needed, e.g. %gpusnap after training")
    import gputop

    vals = gputop.snapshot(label)
    if not vals:
        print(f"gputop: snapshot {label!r} ({_why_no_values()}: no allocator values)")
        return
    parts = []
    for dev, v in sorted(vals.items()):
        try:
            parts.append(f"cuda:{dev} allocated {_mib(v['allocated'])}, reserved "
                         f"{_mib(v['reserved'])}, peak {_mib(v['peak'])}")
        except Exception:
            parts.append(f"cuda:{dev} {v!r}")
    print(f"gputop: snapshot {label!r}: " + "; ".join(parts))


def _why_no_values() -> str:
    """Why a snapshot has no allocator values: no torch, no CUDA at all, or
    CUDA not used yet. torch is only looked at when it is already imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported"
    try:
        if not torch.cuda.is_available():
            return "CUDA is absent (torch.cuda.is_available() is False)"
        if not torch.cuda.is_initialized():
            return "CUDA is not initialised yet (no tensor on a GPU so far)"
    except Exception:
        pass
    return "torch reported no device"


# ---- %gpuholders ----

def gpuholders_magic(ip: Any, line: str) -> None:
    """%gpuholders [--device DEV] [--top N] [--collect]: the holders table."""
    a = _Args("gpuholders", line, {"--collect"}, {"--device", "--top"})
    if a.rest:
        raise _usage("gpuholders", f"unexpected {' '.join(a.rest)!r}")
    top = a.number("gpuholders", "--top", int)
    res = _holders.holders(a.opts.get("--device"), top=top, collect="--collect" in a.flags)
    print(res.table())


# ---- %gpucleanup ----

def gpucleanup_magic(ip: Any, line: str) -> None:
    """%gpucleanup [--keep-history] [--keep-traceback]: drop history and
    traceback references to device tensors, then gputop.cleanup()."""
    a = _Args("gpucleanup", line, {"--keep-history", "--keep-traceback"}, set())
    if a.rest:
        raise _usage("gpucleanup", f"unexpected {' '.join(a.rest)!r}")
    if "--keep-history" not in a.flags:
        dropped = drop_output_history(ip)
        if dropped:
            print(f"gputop: dropped {', '.join(dropped)} from the output history")
    if "--keep-traceback" not in a.flags:
        tb = drop_last_traceback(ip)
        if tb:
            print(f"gputop: dropped the stored exception ({', '.join(tb)}): its frames held tensors")
    import gputop

    gputop.cleanup()


def drop_output_history(ip: Any, device: Any = None) -> list[str]:
    """Remove from IPython's output history the entries that are or contain
    tensors on device (default: $GPUTOP_HOLDERS_DEVICE or CUDA): Out[N] (the
    same dict as _oh), _N, and _, __, ___ while they are the history's own.
    Everything else stays. Returns what was dropped, e.g. ["Out[3]", "_"]."""
    dropped: list[str] = []
    try:
        ns = ip.user_ns
        hidden = getattr(ip, "user_ns_hidden", {}) or {}
        outs = []
        for d in (ns.get("Out"), ns.get("_oh"),
                  getattr(getattr(ip, "history_manager", None), "output_hist", None)):
            if isinstance(d, dict) and all(d is not o for o in outs):
                outs.append(d)
        holds = _holders.holds_device_tensors
        for out in outs:
            for k, v in list(out.items()):
                if not holds(v, device):
                    continue
                del out[k]
                if f"Out[{k}]" not in dropped:
                    dropped.append(f"Out[{k}]")
                for d in (ns, hidden):
                    if d.get(f"_{k}") is v:
                        del d[f"_{k}"]
        # _N left behind by a culled Out
        for k, v in list(ns.items()):
            if (isinstance(k, str) and k[:1] == "_" and k[1:].isdigit()
                    and hidden.get(k) is v and holds(v, device)):
                del ns[k]
                hidden.pop(k, None)
                if f"Out[{k[1:]}]" not in dropped:
                    dropped.append(f"Out[{k[1:]}]")
        dh = getattr(ip, "displayhook", None)
        for name in ("_", "__", "___"):
            dv = getattr(dh, name, None) if dh is not None else None
            nv = ns.get(name)
            # only the history's own value: a user's `_ = x` is theirs
            ours = nv is not None and (nv is dv or hidden.get(name) is nv)
            if ours and holds(nv, device):
                ns[name] = ""
                if name in hidden:
                    hidden[name] = ""
                dropped.append(name)
            if dv is not None and holds(dv, device):
                setattr(dh, name, "")
                if name not in dropped:
                    dropped.append(name)
        er = getattr(ip, "last_execution_result", None)
        if er is not None and getattr(er, "result", None) is not None and holds(er.result, device):
            er.result = None  # the previous cell's value, kept until this cell ends
    except Exception as e:
        print(f"gputop: could not clean the output history: {type(e).__name__}: {e}",
              file=sys.stderr)
    return dropped


def drop_last_traceback(ip: Any, device: Any = None) -> list[str]:
    """Forget the stored exception (sys.last_*, IPython's copy for %debug)
    when the frames it keeps hold tensors on device. Returns what was dropped."""
    dropped: list[str] = []
    try:
        holds = _holders.holds_device_tensors
        tbh = getattr(ip, "InteractiveTB", None) if ip is not None else None
        er = getattr(ip, "last_execution_result", None) if ip is not None else None
        found = [getattr(sys, n, None) for n in ("last_value", "last_traceback", "last_exc")]
        found += [getattr(tbh, "tb", None), getattr(er, "error_in_exec", None)]
        if not any(x is not None and holds(x, device) for x in found):
            return dropped
        for n in ("last_type", "last_value", "last_traceback", "last_exc"):
            if getattr(sys, n, None) is not None:
                try:
                    delattr(sys, n)
                    dropped.append(f"sys.{n}")
                except AttributeError:
                    pass
        if tbh is not None and getattr(tbh, "tb", None) is not None:
            tbh.tb = None
            dropped.append("%debug's traceback")
        if er is not None and getattr(er, "error_in_exec", None) is not None:
            er.error_in_exec = None
    except Exception as e:
        print(f"gputop: could not drop the stored exception: {type(e).__name__}: {e}",
              file=sys.stderr)
    return dropped
