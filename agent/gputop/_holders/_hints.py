"""The one-line fix each holder group gets: what keeps the memory alive
and the statement that lets it go, in the words of the variable, module or
optimizer that holds it."""

from __future__ import annotations

import sys
from typing import Any

from . import _frameworks
from ._classify import _ipython
from ._group import _Group


def _has_role(g: _Group, role: str) -> bool:
    return any(m[2] == role for m in g.members)


def _del_stmt(paths: list[str]) -> str:
    return "del " + ", ".join(paths)


def _hint(g: _Group, dev: str) -> str:
    """g's fix; dev names the walked device's tensors ("CUDA", "cpu")."""
    m = g.meta
    n = len(g.members)
    path = m.get("path", g.name)
    local = m.get("local")  # "in train()": a local of a function still running
    gone = f"; released when {local[3:]} returns" if local else ""
    if g.cat in ("module", "optim") and m.get("trainer"):
        var, kind = m["trainer"]
        what = "model" if g.cat == "module" else "optimizer"
        if local:
            return f"{var} ({kind}) keeps its {what} {path}: released when {local[3:]} returns"
        return (f"{var} ({kind}) keeps its {what} {path}, and with it the optimizer's state and the "
                f"scheduler: del {var}; gputop.cleanup()")
    if g.cat == "module":
        cls = m.get("cls", "module")
        wrapped = _frameworks.wrapper(cls)
        if wrapped:
            cls += (f"; {wrapped} also keeps gradient buckets as large as the gradients, in C++ memory "
                    "the walk cannot reach")
        if local:
            return f"{path} ({cls}) is a local of {local[3:]}, still running{gone}"
        opts = m.get("opts") or []
        if opts:
            who = f"{path} and its optimizer" if len(opts) == 1 else f"{path} and its optimizers"
            return f"{who} are still referenced: {_del_stmt([path] + opts)}; gputop.cleanup()"
        return f"{path} ({cls}) is still referenced: {_del_stmt([path])}; gputop.cleanup()"
    if g.cat == "grad":
        return (f"{path}'s parameters keep {n} .grad tensors: "
                f"{path}.zero_grad(set_to_none=True), or del {path}{gone}")
    if g.cat == "optim":
        allkeys = sorted(m.get("state_keys", ()))
        keys = [k for k in allkeys if k != "step"] or allkeys
        what = f"state ({', '.join(keys)})" if keys else "state"
        extra = (" and the parameters of a model no variable names any more"
                 if _has_role(g, "oparam") else "")
        if local:
            return f"{path} holds its {what}{extra}{gone}"
        return f"{path} holds its {what}{extra}: del {path}; gputop.cleanup()"
    if g.cat in ("tensor", "items"):
        direct = [x for x in g.members if x[2] in ("direct", "item")]
        gradfn = len(m.get("gradfn", ()))
        graph = sum(1 for x in g.members if x[2] == "graph")
        params = sum(1 for x in g.members if x[2] == "gparam")
        fix_del = gone[2:] if local else f"del {path}"
        if g.cat == "items":
            if gradfn:
                scal = sum(1 for x in direct if _is_scalar(x[1]))
                loss = scal * 2 >= max(1, len(direct))
                noun = "loss tensors" if loss else "tensors"
                fix = "append loss.item()" if loss else "keep t.detach() (or t.item() / t.cpu())"
                more = _graph_note(graph, params, "their autograd graphs keep ")
                return f"{path} holds {gradfn} {noun} with grad_fn{more}: {fix}{gone}"
            return f"{path} holds {len(direct)} {dev} tensors: keep .item() / .cpu() values, or {fix_del}"
        if gradfn:
            note = _graph_note(graph, params, "it keeps ")
            if direct and _is_scalar(direct[0][1]):
                return (f"{path} is a loss tensor with grad_fn{note}: keep {path}.item(), "
                        f"or {fix_del}")
            return (f"{path} carries an autograd graph{note}: run inference "
                    f"under torch.no_grad(), or {path} = {path}.detach(){gone}")
        return f"{path} is a {dev} tensor: {fix_del}"
    if g.cat == "history":
        labels = sorted({x[3] for x in g.members if x[3].startswith("Out[")},
                        key=lambda s: int(s[4:-1]) if s[4:-1].isdigit() else 0)
        where = f" ({', '.join(labels[:4])}{', ...' if len(labels) > 4 else ''})" if labels else ""
        if _ipython() is None:
            return "the REPL's _ holds the last result: evaluate something else (e.g. 0)"
        return (f"IPython Out history holds {n} {dev} tensors{where}: %gpucleanup, or del Out[N] "
                "and _N (end a cell with ; to keep its value out of Out)")
    if g.cat == "traceback":
        funcs = m.get("funcs") or []
        fn = f" ({', '.join(funcs[:3])})" if funcs else ""
        if m.get("sys"):
            names = ["sys.last_type", "sys.last_value", "sys.last_traceback"]
            if hasattr(sys, "last_exc"):
                names.append("sys.last_exc")
            if _ipython() is not None:
                return (f"sys.last_traceback keeps the frames of the failed call{fn} alive "
                        "(IPython keeps a copy for %debug): %gpucleanup drops both")
            return (f"sys.last_traceback keeps the frames of the failed call{fn} alive: "
                    f"{_del_stmt(names)}; gputop.cleanup()")
        if m.get("ipython"):
            return (f"IPython keeps the last exception for %debug, with the frames of the failed "
                    f"call{fn}: %gpucleanup drops it")
        if m.get("handled"):
            return f"the exception being handled keeps the frames{fn} alive until its except block ends"
        return f"{path} keeps an exception's frames{fn} alive: del {path}; gputop.cleanup(){gone}"
    if g.cat == "other":
        desc = m.get("desc")
        if m.get("compiled"):
            return (f"{n} parameters of a model no variable reaches: torch.compile's caches keep them "
                    "after the model is gone: torch.compiler.reset(); gputop.cleanup()")
        if m.get("unasked"):
            return ("no variable reaches these within a few hops (too small to look up "
                    "their referrers); gc.get_referrers(t) shows what holds one, or "
                    "gputop.cleanup() if they are garbage")
        if desc:
            return (f"no variable names it; it is referenced by {desc} "
                    "(gc.get_referrers(t) to dig), or gputop.cleanup() if it is garbage")
        return ("no variable names it and no Python object refers to it: an autograd graph "
                "or a C++ owner keeps it; gputop.cleanup() frees it if it is garbage")
    return ""


def _graph_note(saved: int, params: int, lead: str) -> str:
    parts = []
    if saved:
        parts.append(f"{saved} saved tensor{'s' if saved != 1 else ''}")
    if params:
        parts.append(f"{params} parameter{'s' if params != 1 else ''}")
    return f" ({lead}{' and '.join(parts)} alive)" if parts else ""


def _is_scalar(t: Any) -> bool:
    try:
        return t.dim() == 0 or t.numel() == 1
    except Exception:
        return False
