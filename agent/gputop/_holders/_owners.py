"""The owners the walk knows by their shape rather than as containers:
modules (parameters, buffers, their .grad, tensors kept as attributes),
optimizers (their state and the parameters they step), and exceptions,
tracebacks and function frames (the locals they keep alive)."""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Any

from ._classify import (_P_OPARAM, _P_PARAM, _P_STATE, _SKIP_PREFIXES, _T_DICT, _T_MODULE, _T_OPTIM, _T_SEQ,
                        _T_TENSOR)

_CO_OPTIMIZED = 0x1


class _Owners:
    """Methods of the walker (_walker._Walker) for modules, optimizers,
    exceptions, tracebacks and frames."""

    # -- modules, optimizers --

    def module(self, m: Any, name: str, root: int, single: int | None, label: str,
               depth: int, suffix: str) -> None:
        if single is None:
            gid = self.ngroup("module", name, suffix)
            ggid = self.ngroup("grad", name, suffix, f"{name} (.grad){suffix}")
            self.groups[gid].meta["cls"] = type(m).__name__
        else:
            gid = ggid = single
        stack = [(m, "")]
        while stack:
            mod, sub = stack.pop()
            if id(mod) in self.seen and mod is not m:
                continue
            self.seen.add(id(mod))
            self.keep.append(mod)
            if not self.budget():
                return
            try:
                d = object.__getattribute__(mod, "__dict__")
            except Exception:
                self.skipped += 1
                continue
            if not isinstance(d, dict):
                continue
            for store in ("_parameters", "_buffers"):
                vals = d.get(store)
                if not isinstance(vals, dict):
                    continue
                for _, p in self.items(vals, _T_DICT):
                    if self.tclass(type(p)) != _T_TENSOR:
                        continue
                    if single is None:
                        self.param_owner[id(p)] = gid
                    self.tensor(p, gid, root, _P_PARAM, "param", label, grad_gid=ggid)
            kids = d.get("_modules")
            if isinstance(kids, dict):
                try:
                    got = list(itertools.islice(dict.items(kids), self.max_items))
                except Exception:
                    self.skipped += 1
                    got = []
                for k, c in got:
                    if c is not None and self.tclass(type(c)) == _T_MODULE:
                        stack.append((c, f"{sub}.{k}"))
            # tensors a module keeps as plain attributes (caches, last outputs)
            try:
                got = list(itertools.islice(dict.items(d), self.max_items))
            except Exception:
                self.skipped += 1
                got = []
            for k, v in got:
                if not isinstance(k, str) or k.startswith("_") or type(v) in self.atom_types:
                    continue
                self.queue.append((v, f"{name}{sub}.{k}", depth + 1, None, False,
                                   root, single, label, suffix))

    def optimizer(self, o: Any, name: str, root: int, single: int | None, label: str,
                  suffix: str) -> None:
        if single is None:
            gid = self.ngroup("optim", name, suffix, f"{name} ({type(o).__name__}){suffix}")
            self.groups[gid].meta["cls"] = type(o).__name__
        else:
            gid = single
        keys: set[str] = self.groups[gid].meta.setdefault("state_keys", set())
        params = self.opt_params.setdefault(gid, set())
        try:
            d = object.__getattribute__(o, "__dict__")
        except Exception:
            self.skipped += 1
            return
        # a wrapper (accelerate's AcceleratedOptimizer) keeps the optimizer
        # whose state and param_groups its properties show
        inner = d.get("optimizer") if isinstance(d, dict) else None
        if inner is not None and self.tclass(type(inner)) == _T_OPTIM and id(inner) not in self.seen:
            self.seen.add(id(inner))
            self.keep.append(inner)
            self.optimizer(inner, name, root, gid, label, suffix)
        state = d.get("state") if isinstance(d, dict) else None
        if isinstance(state, dict):
            for _, st in self.items(state, _T_DICT):
                if not isinstance(st, dict):
                    continue
                for k, v in self.items(st, _T_DICT):
                    if self.tclass(type(v)) == _T_TENSOR:
                        if self.claim(v, gid, self.prio(root, _P_STATE), "state", label):
                            keys.add(k[2:-2])
        pgs = d.get("param_groups") if isinstance(d, dict) else None
        if isinstance(pgs, list):
            for _, pg in self.items(pgs, _T_SEQ):
                if not isinstance(pg, dict):
                    continue
                ps = pg.get("params")
                if not isinstance(ps, (list, tuple)):
                    continue
                for _, p in self.items(ps, _T_SEQ):
                    if self.tclass(type(p)) == _T_TENSOR:
                        params.add(id(p))
                        self.keep.append(p)
                        self.tensor(p, gid, root, _P_OPARAM, "oparam", label)

    # -- exceptions, tracebacks, frames --

    def exception(self, e: Any, gid: int, root: int, label: str) -> None:
        chain = [e]
        n = 0
        while chain and n < 64:
            x = chain.pop()
            n += 1
            if id(x) in self.seen and x is not e:
                continue
            self.seen.add(id(x))
            self.keep.append(x)
            try:
                tb = x.__traceback__
                ctx = x.__context__
                cause = x.__cause__
            except Exception:
                self.skipped += 1
                continue
            if tb is not None:
                self.traceback(tb, gid, root, label)
            for y in (ctx, cause):
                if y is not None:
                    chain.append(y)

    def traceback(self, tb: Any, gid: int, root: int, label: str) -> None:
        funcs: list[str] = self.groups[gid].meta.setdefault("funcs", [])
        n = 0
        while tb is not None and n < 1000:
            n += 1
            if id(tb) in self.seen:
                break
            self.seen.add(id(tb))
            self.keep.append(tb)
            try:
                fr = tb.tb_frame
                nxt = tb.tb_next
            except Exception:
                self.skipped += 1
                break
            name = self.frame(fr, gid, root, label)
            if name and name not in funcs:
                funcs.append(name)
            tb = nxt

    def frame(self, fr: Any, gid: int | None, root: int, label: str) -> str | None:
        """Walk a function frame's locals; returns its function name when walked.
        gid None: each local is a named root "x in f()" (running frames)."""
        # frames are not kept: a running frame of this walk would make a cycle
        # (walker -> frame -> walker); the others are alive while they run or
        # while their traceback is
        if id(fr) in self.seen:
            return None
        self.seen.add(id(fr))
        try:
            code = fr.f_code
            mod = str(fr.f_globals.get("__name__", ""))
        except Exception:
            self.skipped += 1
            return None
        if not (code.co_flags & _CO_OPTIMIZED) or mod.startswith(_SKIP_PREFIXES):
            return None  # module level (its names are globals) or machinery
        try:
            loc = fr.f_locals
        except Exception:
            self.skipped += 1
            return None
        fname = f"{code.co_name}()"
        if sys.version_info < (3, 13) and isinstance(loc, dict):
            # f_locals of a function frame is a snapshot that would keep these
            # values alive until the function ends; emptied after the walk
            # (unless a tracer is using it: it refreshes the snapshot itself)
            try:
                if (fr.f_trace is None and sys.gettrace() is None
                        and getattr(threading, "gettrace", lambda: None)() is None):
                    self.cleared.append(loc)
            except Exception:
                pass
        try:
            got = list(itertools.islice(dict.items(loc) if isinstance(loc, dict) else loc.items(),
                                        self.max_items))
        except Exception:
            self.skipped += 1
            return fname
        for k, v in got:
            if type(v) in self.atom_types:
                continue
            if gid is None:
                self.queue.append((v, str(k), 0, None, False, root, None, f"{k} in {fname}",
                                   f" in {fname}"))
            else:
                self.queue.append((v, f"{fname}.{k}", 1, None, False, root, gid, label, ""))
        return fname
