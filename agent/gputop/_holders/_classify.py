"""What the walk recognises: the class of each type it meets (tensors,
modules, optimizers, containers, exceptions, graph nodes, atoms, machinery
it skips), the categories of owners and their wire kinds, which owner wins
a storage two of them reach, and IPython's own names in the user's
namespace."""

from __future__ import annotations

import collections
import sys
import types
import weakref
from typing import Any

# group categories -> wire kinds
_KIND = {
    "module": "parameters",
    "grad": "gradients",
    "optim": "optimizer_state",
    "history": "ipython_history",
    "traceback": "traceback",
    "other": "other",
    "internal": "torch_internal",
}

# claim priorities within a root class: lower wins
_P_PARAM, _P_PGRAD, _P_STATE, _P_OPARAM, _P_OGRAD, _P_DIRECT, _P_ITEM, _P_TGRAD, _P_GRAPH = range(9)

# frames and objects from these packages are machinery, not the user's data
_SKIP_PREFIXES = (
    "gputop", "IPython", "ipykernel", "traitlets", "tornado", "asyncio", "zmq",
    "jupyter_client", "jupyter_core", "threading", "concurrent", "selectors",
    "runpy", "_pytest", "pytest", "pluggy", "queue", "socketserver", "code",
    "codeop", "pdb", "bdb", "importlib", "contextlib", "debugpy", "pydevd",
    "_pydevd_bundle", "prompt_toolkit", "comm", "logging", "torch", "numpy",
    "pandas", "matplotlib", "unittest", "multiprocessing", "subprocess", "select",
)
# modules whose objects are walked although their frames are skipped
_WALK_TYPES_FROM = ("torch.utils.data",)

_HISTORY_NAMES = frozenset({"_", "__", "___", "_i", "_ii", "_iii", "_ih", "_oh", "_dh",
                            "In", "Out", "exit", "quit", "get_ipython"})

# type classes
(_T_ATOM, _T_TENSOR, _T_MODULE, _T_OPTIM, _T_DICT, _T_SEQ, _T_EXC, _T_TB, _T_FRAME,
 _T_NODE, _T_OBJ, _T_SKIP) = range(12)
_FINDS = frozenset({_T_TENSOR, _T_MODULE, _T_OPTIM, _T_EXC, _T_TB, _T_FRAME, _T_NODE})

_ATOMS = {int, float, complex, bool, str, bytes, bytearray, type(None), range, slice,
          type(Ellipsis), type(NotImplemented), memoryview}
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, property, staticmethod, classmethod,
           types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
           weakref.ref, weakref.ProxyType, types.MappingProxyType, types.CellType,
           types.MethodWrapperType, types.WrapperDescriptorType, types.GetSetDescriptorType,
           types.MemberDescriptorType, types.SimpleNamespace.__class__)


def classify(w: Any, tp: type) -> int:
    """The type class of tp (one of _T_*), with walker w's atom types and
    torch classes; the walker caches it per type."""
    try:
        if tp in w.atom_types:
            return _T_ATOM
        if issubclass(tp, w.torch.Tensor):
            return _T_TENSOR
        if w.Module is not None and issubclass(tp, w.Module):
            return _T_MODULE
        if w.Optimizer is not None and issubclass(tp, w.Optimizer):
            return _T_OPTIM
        if issubclass(tp, dict):
            return _T_DICT
        if issubclass(tp, (list, tuple, set, frozenset, collections.deque)):
            return _T_SEQ
        if issubclass(tp, BaseException):
            return _T_EXC
        if tp is types.TracebackType:
            return _T_TB
        if tp is types.FrameType:
            return _T_FRAME
        if w.Node is not None and issubclass(tp, w.Node):
            return _T_NODE
        if issubclass(tp, _OPAQUE) or issubclass(tp, (str, bytes, int, float)):
            return _T_SKIP
        mod = str(getattr(tp, "__module__", "") or "")
        if mod.startswith(_SKIP_PREFIXES) and not mod.startswith(_WALK_TYPES_FROM):
            return _T_SKIP
        return _T_OBJ
    except Exception:
        return _T_SKIP


def _ipython() -> Any:
    mod = sys.modules.get("IPython")
    if mod is None:
        return None
    try:
        return mod.get_ipython()
    except Exception:
        return None


def _hidden_name(k: str, ipython: bool) -> bool:
    """Dunders, and under IPython its own names (history: walked as such)."""
    if k.startswith("__") and k.endswith("__") and len(k) > 4:
        return True
    if not ipython:
        return False
    if k in _HISTORY_NAMES:
        return True
    return k[:1] == "_" and (k[1:].isdigit() or (k[1:2] == "i" and k[2:].isdigit()))


def _slot_descriptors(tp: type) -> list[tuple[str, Any, type]]:
    """(name, member descriptor, class) of every __slots__ entry of tp."""
    out: list[tuple[str, Any, type]] = []
    try:
        mro = tp.__mro__
    except Exception:
        return out
    for cls in mro:
        try:
            slots = cls.__dict__.get("__slots__")
        except Exception:
            continue
        if not slots:
            continue
        if isinstance(slots, str):
            slots = (slots,)
        try:
            names = list(slots)
        except Exception:
            continue
        for name in names:
            if not isinstance(name, str) or name in ("__dict__", "__weakref__"):
                continue
            desc = cls.__dict__.get(name)
            if type(desc) is types.MemberDescriptorType:
                out.append((name, desc, cls))
    return out


def _subclasses(cls: type) -> set[type]:
    out = {cls}
    todo = [cls]
    while todo:
        c = todo.pop()
        try:
            subs = type.__subclasses__(c)
        except Exception:
            continue
        for sc in subs:
            if sc not in out:
                out.add(sc)
                todo.append(sc)
    return out
