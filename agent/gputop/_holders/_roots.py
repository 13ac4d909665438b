"""Where a walk starts, in order (the user's namespace, running functions'
locals, IPython's output history, stored exceptions, then every tensor gc
tracks that none of those reached), and the guess of what refers to the
tensors no root reached."""

from __future__ import annotations

import builtins
import collections
import gc
import itertools
import sys
import threading
import time
import types
from typing import Any

from ._classify import _P_DIRECT, _hidden_name, _ipython, _subclasses
from ._result import HolderGroup

REFERRER_TENSORS = 16  # unnamed tensors (largest first) given a referrer guess
REFERRER_MIN_BYTES = 1 << 20  # unnamed bytes (or 1% of all) that earn a referrer pass
SECOND_PASS_MS = 100.0  # a second gc.get_referrers pass only while the walk took less so far


class _Roots:
    """Methods of the walker (_walker._Walker): the roots and the run."""

    def run(self) -> list[HolderGroup]:
        torch = self.torch
        try:
            self.roots_user()
            self.drain()
            self.roots_stack()
            self.drain()
            self.roots_history()
            self.drain()
            self.roots_traceback()
            self.drain()
            # then every tensor object gc tracks: those no root reached (a
            # pass over every object; a walk for a ledger alone skips it when
            # the roots already explain every live block)
            if not self.late() and not (not self.name_rest and self.explained()):
                base = {torch.Tensor, getattr(torch.nn, "Parameter", torch.Tensor),
                        getattr(torch.nn, "Buffer", torch.Tensor)}
                gc_tensors = _gc_tensors(torch, base | self.ttypes_seen)
                gc_tensors = [t for t in gc_tensors if self.keys_of(t)]
                self.roots_other(gc_tensors)
                del gc_tensors
                self.drain()
                self.late()
        finally:
            for d in self.cleared:
                try:
                    dict.clear(d)
                except Exception:
                    pass
            self.cleared = []
        out = self.finish()
        out.extend(self.remainder(torch))
        return out

    def roots_user(self) -> None:
        seen_ns: set[int] = set()
        spaces: list[dict[str, Any]] = []
        main = sys.modules.get("__main__")
        md = getattr(main, "__dict__", None)
        if isinstance(md, dict):
            spaces.append(md)
        shell = _ipython()
        if shell is not None:
            try:
                ns = shell.user_ns
                if isinstance(ns, dict):
                    spaces.append(ns)
            except Exception:
                self.skipped += 1
        ipy = shell is not None
        for ns in spaces:
            if id(ns) in seen_ns:
                continue
            seen_ns.add(id(ns))
            try:
                got = list(itertools.islice(dict.items(ns), self.max_items * 10))
            except Exception:
                self.skipped += 1
                continue
            for k, v in got:
                if not isinstance(k, str) or _hidden_name(k, ipy):
                    continue
                self.queue.append((v, k, 0, None, False, 0, None, k, ""))
            self.seen.add(id(ns))

    def roots_stack(self) -> None:
        try:
            frames = sys._current_frames()
        except Exception:
            self.skipped += 1
            return
        # this very frame is in there: every name that reaches it is dropped
        # before returning, or frame <-> locals would keep the stack (and the
        # tensors in its locals) alive until the next gc run
        main = threading.main_thread().ident
        order = sorted(frames, key=lambda ident: ident != main)
        try:
            for ident in order:
                fr = frames.get(ident)
                n = 0
                while fr is not None and n < 200:
                    n += 1
                    self.frame(fr, None, 1, "")
                    try:
                        fr = fr.f_back
                    except Exception:
                        break
        finally:
            fr = None
            frames.clear()
            del frames

    def roots_history(self) -> None:
        gid = self.group("history", "Out history")
        shell = _ipython()
        q = self.queue
        if shell is None:
            v = builtins.__dict__.get("_")
            if v is not None and type(v) not in self.atom_types:
                q.append((v, "_", 0, None, False, 2, gid, "_", ""))
            return
        try:
            ns = shell.user_ns
            out = ns.get("Out", ns.get("_oh"))
            if isinstance(out, dict):
                for k, v in reversed(list(itertools.islice(dict.items(out), self.max_items))):
                    q.append((v, f"Out[{k}]", 0, None, False, 2, gid, f"Out[{k}]", ""))
            for name in ("_", "__", "___"):
                if name in ns:
                    q.append((ns[name], name, 0, None, False, 2, gid, name, ""))
            for k, v in list(dict.items(ns)):
                if isinstance(k, str) and k[:1] == "_" and k[1:].isdigit():
                    q.append((v, k, 0, None, False, 2, gid, f"Out[{k[1:]}]", ""))
            dh = getattr(shell, "displayhook", None)
            for name in ("_", "__", "___"):
                v = getattr(dh, name, None) if dh is not None else None
                if v is not None:
                    q.append((v, name, 0, None, False, 2, gid, name, ""))
            er = getattr(shell, "last_execution_result", None)
            v = getattr(er, "result", None) if er is not None else None
            if v is not None:
                q.append((v, "_", 0, None, False, 2, gid, "_", ""))
        except Exception:
            self.skipped += 1

    def roots_traceback(self) -> None:
        gid = self.group("traceback", "sys.last_traceback")
        self.groups[gid].meta["sys"] = True
        for name in ("last_traceback", "last_value", "last_exc"):
            v = getattr(sys, name, None)
            if v is not None:
                self.queue.append((v, f"sys.{name}", 0, None, False, 3, gid, f"sys.{name}", ""))
        try:
            cur = sys.exc_info()[1]
        except Exception:
            cur = None
        if cur is not None:
            g2 = self.group("traceback", "exception being handled")
            self.groups[g2].meta["handled"] = True
            self.queue.append((cur, "sys.exc_info()", 0, None, False, 3, g2, "sys.exc_info()", ""))
        shell = _ipython()
        if shell is not None:
            g3 = self.group("traceback", "IPython's last traceback (%debug)")
            self.groups[g3].meta["ipython"] = True
            try:
                tbh = getattr(shell, "InteractiveTB", None)
                tb = getattr(tbh, "tb", None) if tbh is not None else None
                if tb is not None:
                    self.queue.append((tb, "InteractiveTB.tb", 0, None, False, 3, g3, "tb", ""))
                er = getattr(shell, "last_execution_result", None)
                for a in ("error_in_exec", "error_before_exec"):
                    e = getattr(er, a, None) if er is not None else None
                    if e is not None:
                        self.queue.append((e, a, 0, None, False, 3, g3, a, ""))
            except Exception:
                self.skipped += 1

    def roots_other(self, gc_tensors: list[Any]) -> None:
        """Tensors no root reached: name their holder by one referrer pass."""
        loose: dict[Any, Any] = {}
        for t in gc_tensors:
            for key in self.tkeys.get(id(t), ()):
                if key not in self.claims and key not in loose:
                    loose[key] = t
        if not loose:
            return
        order = sorted(loose, key=lambda k: -self.sizes.get(k, 0))
        names: dict[int, str] = {}
        # a referrer pass costs one traversal of every object: worth it only
        # for what matters next to what was found
        lost = sum(self.sizes.get(k, 0) for k in order)
        if self.name_rest and (lost >= REFERRER_MIN_BYTES or lost * 100 >= sum(self.sizes.values())):
            guess = [loose[k] for k in order[:REFERRER_TENSORS]]
            names = self.referrers(guess, (gc_tensors, loose, guess))
            del guess
        for key in order:
            t = loose[key]
            desc = names.get(id(t))
            if desc:
                gid = self.group("other", f"held by {desc}")
            elif desc is None:  # past the few that were asked about
                gid = self.group("other", "unnamed holders")
                self.groups[gid].meta["unasked"] = True
            else:
                gid = self.group("other", "no Python referrer")
            self.groups[gid].meta["desc"] = desc
            self.tensor(t, gid, 4, _P_DIRECT, "direct", desc or "")

    def referrers(self, tensors: list[Any], mine: tuple[Any, ...]) -> dict[int, str]:
        """id(tensor) -> a short description of what refers to it. Costs one
        gc.get_referrers pass over every tracked object, two when the first
        finds only anonymous dicts and lists."""
        out: dict[int, str] = {}
        ours = {id(x) for x in (self.keep, self.claims, self.tkeys, self.groups, self.queue,
                                self.cleared, tensors, out) + mine}
        wanted = {id(t) for t in tensors}
        try:
            refs = gc.get_referrers(*tensors)
        except Exception:
            self.skipped += 1
            return out
        ours.add(id(refs))
        modns: dict[int, str] = {}
        for name, m in list(sys.modules.items()):
            d = getattr(m, "__dict__", None)
            if isinstance(d, dict):
                modns[id(d)] = name
        inner: list[Any] = []  # anonymous containers: who holds them is asked next
        inner_key: dict[int, Any] = {}
        inner_held: dict[int, list[int]] = {}
        for t in tensors:
            out[id(t)] = ""  # asked; stays "" when nothing but the walk refers to it
        for r in refs:
            if id(r) in ours or isinstance(r, types.FrameType):
                continue
            try:
                held = [id(x) for x in gc.get_referents(r) if id(x) in wanted]
            except Exception:
                continue
            if not held:
                continue
            if isinstance(r, dict):
                key = next((k for k, v in dict.items(r) if id(v) in wanted), None)
                mn = modns.get(id(r))
                if mn is not None:
                    desc = f"{mn}.{key}"
                else:
                    inner.append(r)
                    inner_key[id(r)] = key
                    inner_held[id(r)] = held
                    continue
            elif isinstance(r, (list, tuple, set, collections.deque)):
                inner.append(r)
                inner_key[id(r)] = None
                inner_held[id(r)] = held
                continue
            elif isinstance(r, types.CellType):
                desc = "a closure variable"
            elif self.Node is not None and isinstance(r, self.Node):
                desc = f"an autograd node ({type(r).__name__})"
            else:
                desc = self._describe_holder(r, None, None, modns, wanted)
            for i in held:
                if not out.get(i):
                    out[i] = desc
        del refs
        # the second pass (who holds those anonymous lists and dicts) costs as
        # much as the first: only while the walk is still cheap
        if inner and (time.perf_counter() - self.t0) * 1e3 < SECOND_PASS_MS:
            inner = inner[: REFERRER_TENSORS * 2]
            ours.add(id(inner))
            try:
                refs2 = gc.get_referrers(*inner)
            except Exception:
                refs2 = []
            ours.add(id(refs2))
            ids = {id(o): o for o in inner}
            for r in refs2:
                if id(r) in ours or isinstance(r, types.FrameType):
                    continue
                try:
                    found = [x for x in gc.get_referents(r) if id(x) in ids]
                except Exception:
                    continue
                for x in found:
                    desc = self._describe_holder(r, x, inner_key.get(id(x)), modns)
                    for i in inner_held.get(id(x), ()):
                        if not out.get(i):
                            out[i] = desc
            del refs2
        for x in inner:
            for i in inner_held.get(id(x), ()):
                if not out.get(i):
                    k = inner_key.get(id(x))
                    out[i] = (f"a dict (key {k!r})" if isinstance(x, dict)
                              else f"a {type(x).__name__} of {len(x)} items")
        return out

    def _describe_holder(self, r: Any, x: Any, key: Any, modns: dict[int, str],
                         wanted: set[int] | None = None) -> str:
        """r refers to the anonymous container x (which holds the tensor under
        key), or, with wanted, straight to one of the wanted tensors."""
        if wanted is not None:
            owner = type(r).__name__
            try:
                own = object.__getattribute__(r, "__dict__")
                for attr, v in (dict.items(own) if isinstance(own, dict) else ()):
                    if id(v) in wanted:
                        return f"{owner}.{attr}"
            except Exception:
                pass
            return f"a {owner} object"
        try:
            if isinstance(r, dict):
                name = next((k for k, v in dict.items(r) if v is x), "?")
                mn = modns.get(id(r))
                if mn is not None:
                    return f"{mn}.{name}"
                return f"a dict's {name!r} entry"
            owner = type(r).__name__
            try:
                own = object.__getattribute__(r, "__dict__")
            except Exception:
                own = None
            if own is x:
                return f"{owner}.{key}" if key is not None else f"a {owner} object"
            for attr, v in (dict.items(own) if isinstance(own, dict) else ()):
                if v is x:
                    return f"{owner}.{attr}"
            return f"a {type(x).__name__} inside a {owner}"
        except Exception:
            return f"a {type(x).__name__}"


_TYPE_VISITED: bool | None = None


def _gc_tensors(torch: Any, types_: set[type]) -> list[Any]:
    """The tensor objects the garbage collector tracks, found in C: a torch
    process has ~200k objects. A tensor's traverse visits its type, so one
    gc.get_referrers pass over the tensor types finds them without building
    the list of all objects (checked once on a probe; else that list it is).
    The pass costs per type asked about: only torch's own and the subclasses
    the walk met are (instances of a subclass no root reaches are missed,
    and counted by the CUDA remainder)."""
    global _TYPE_VISITED
    ttypes = _subclasses(torch.Tensor)
    if _TYPE_VISITED is None:
        try:
            probe = torch.nn.Parameter(torch.empty(0))
            _TYPE_VISITED = (type(probe) in gc.get_referents(probe)
                             and torch.Tensor in gc.get_referents(torch.empty(0)))
            del probe
        except Exception:
            _TYPE_VISITED = False
    if _TYPE_VISITED:
        refs = gc.get_referrers(*(types_ & ttypes))
    else:
        refs = gc.get_objects()
    try:
        return list(itertools.compress(refs, map(ttypes.__contains__, map(type, refs))))
    finally:
        del refs
