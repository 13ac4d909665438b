"""Who holds the memory: groups the live tensors of one device type by what
keeps them alive, sized with each storage counted once.

holders() walks, in this order, and gives each storage to the first (most
specific) owner that reaches it:

1. the user's namespace (``__main__`` globals, IPython's ``user_ns``), up to
   a few attribute / item levels: module parameters and buffers (named by the
   variable, ``model1``, ``trainer.model``), their ``.grad``, optimizer state
   (``optimizer (Adam)``), tensors bound to a name (``x``), tensors in
   containers (``losses``), and the autograd graphs those tensors carry;
2. the locals of functions still running in any thread (``model in train()``);
3. IPython's output history (``Out``, ``_``, ``__``, ``___``, ``_N``);
4. stored exceptions (``sys.last_traceback`` / ``last_value`` / ``last_exc``,
   IPython's copy for %debug) and the locals of the frames they keep;
5. the rest, with a best guess of the referrer (one gc.get_referrers pass
   over the largest few), and, on CUDA, what the allocator holds that no
   Python-visible tensor owns: torch's cuBLAS/cuBLASLt workspaces (live
   blocks of the size torch gives them that no tensor owns), and what
   nothing accounts for.

Each walk also attributes the device's allocated bytes (``held``, the
wire.Held of an end row): every live block of the caching allocator is
counted once, as owned by a storage the walk saw, as a workspace, or as
neither. A walk given a time limit stops there and says so instead.

It never runs unless asked and never raises into the caller: objects whose
attribute access raises, containers past ``max_items``, cycles, tensors whose
storage cannot be read are skipped and counted in ``skipped``.

Saved tensors of autograd graphs are read without running saved-tensor
unpack hooks (activation checkpointing recomputes, CPU offloading copies back
when unpacked): that needs torch's ``SavedTensor.data`` (recent torch); with
an older torch the graph is walked for its structure only.

Test/debug knob: ``GPUTOP_HOLDERS_DEVICE`` (e.g. ``cpu``) is the device type
holders() walks when none is given; the default is ``cuda``.
"""

from __future__ import annotations

import bisect
import builtins
import collections
import ctypes
import gc
import importlib.util
import itertools
import os
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterator

from . import _stats

ENV_DEVICE = "GPUTOP_HOLDERS_DEVICE"

MAX_ITEMS = 10_000  # items read from one container; the rest is counted as skipped
MAX_DEPTH = 3  # attribute / item hops from a variable
MAX_VISITS = 500_000  # objects and graph nodes examined in one walk
REFERRER_TENSORS = 16  # unnamed tensors (largest first) given a referrer guess
REFERRER_MIN_BYTES = 1 << 20  # unnamed bytes (or 1% of all) that earn a referrer pass
SECOND_PASS_MS = 100.0  # a second gc.get_referrers pass only while the walk took less so far
UNREACHABLE = "not reachable from Python"  # the CUDA remainder: listed last, it is no holder
PREFILTER_ITEMS = 64  # a container this long is first checked in C for anything to find
PREFILTER_FRONTIER = 1_000_000  # objects that check may hold at once before giving up
CUDA_BLOCK = 512  # the caching allocator rounds every block up to this
WALK_LIMIT_S = 2.0  # an end row's walk runs in the caller's thread: it stops here
WORKSPACES = "cuBLAS workspaces"  # the torch_internal group

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

_CO_OPTIMIZED = 0x1

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


@dataclass
class HolderGroup:
    """One kind of reference keeping memory alive (wire.HolderGroup)."""

    kind: str  # parameters, gradients, optimizer_state, variable, container,
    #            autograd_graph, ipython_history, traceback, other
    name: str  # "model1", "optimizer (Adam)", "losses", "Out history"...
    bytes: int  # each storage counted once
    tensors: int  # storages in this group
    examples: list[str] = field(default_factory=list)  # "float32[512, 1000]"
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "name": self.name,
                             "bytes": int(self.bytes), "tensors": int(self.tensors)}
        if self.examples:
            d["examples"] = list(self.examples)
        if self.hint:
            d["hint"] = self.hint
        return d


@dataclass
class HoldersResult:
    """What holders() found. Its repr is the table, so a notebook shows it."""

    groups: list[HolderGroup]
    total: int  # bytes in all groups
    skipped: int  # objects the walk skipped (raised, too many, freed meanwhile)
    dev: int  # device index reported to gputop
    device: str  # what was walked: "cuda", "cuda:1", "cpu"
    took_ms: float
    error: str | None = None  # set when the walk could not run at all
    # the attribution of device dev's allocated bytes (wire.Held), when the
    # device's allocator could be read
    held: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The wire.Holders frame without type / t / id / pid."""
        return {"dev": int(self.dev), "total": int(self.total), "skipped": int(self.skipped),
                "groups": [g.as_dict() for g in self.groups], "took_ms": round(self.took_ms, 3)}

    def find(self, name: str, kind: str | None = None) -> HolderGroup | None:
        """The first group with this name (and kind, when given)."""
        for g in self.groups:
            if g.name == name and (kind is None or g.kind == kind):
                return g
        return None

    def by_kind(self, kind: str) -> list[HolderGroup]:
        return [g for g in self.groups if g.kind == kind]

    def __iter__(self) -> Iterator[HolderGroup]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def table(self, top: int | None = None) -> str:
        return format_table(self, top)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.table())


def holders(device: Any = None, top: int | None = None, print_table: bool = False,
            collect: bool = False, max_items: int = MAX_ITEMS,
            time_limit: float | None = None) -> HoldersResult:
    """Find what keeps the memory of ``device`` alive, grouped by holder.

    device: "cuda" (default, every CUDA device; or $GPUTOP_HOLDERS_DEVICE),
        "cuda:1" / 1 (one device), "cpu" (CPU tensors: same walk, for tests).
    top: keep the largest ``top`` groups; the rest are merged into one.
    print_table: also print the table (the returned object's repr is the
        table too, so a notebook cell ending in ``gputop.holders()`` shows it).
    collect: run gc.collect() first, so garbage in reference cycles is gone.
    max_items: items read from one container before the rest is skipped.
    time_limit: seconds after which the walk stops; its attribution (.held)
        then says so instead of counting what it did not reach.

    Returns a HoldersResult (.groups, .total, .skipped, .held, .as_dict(),
    .table()).
    Each group: kind, name, bytes, tensors, up to 3 example "dtype[shape]"
    strings and a one-line hint. Never raises.
    """
    t0 = time.perf_counter()
    t_ns = time.time_ns()
    try:
        res = _run(device, top, collect, max_items, t0, time_limit)
    except BaseException as e:  # never into the user's code, whatever the walk met
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        res = HoldersResult([], 0, 1, 0, str(device or _default_device()),
                            (time.perf_counter() - t0) * 1e3, f"{type(e).__name__}: {e}")
    if res.held is None or res.error:
        why = res.error or "this device's allocator could not be read"
        res.held = {"skipped": f"the holders walk could not attribute the memory: {why}"}
    res.held = {"t": t_ns, "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                **res.held, "took_ms": round(res.took_ms, 3)}
    if print_table:
        try:
            print(res.table())
        except Exception:
            pass
    return res


def holders_report(device: Any = None, timeout: float = 1.0) -> dict[str, Any]:
    """holders() as the agent sends it: wire.Holders without type / t, its
    held the attribution of the walked device (or the current one).

    Called from the agent thread. The walk reads ``.grad`` and autograd
    graphs, which autograd's engine writes without the GIL during backward,
    so it runs on the main thread between two bytecodes (a pending call,
    Py_AddPendingCall) when that thread answers within ``timeout`` seconds.
    When it does not, and it waits in C outside torch (an idle notebook
    kernel's event loop, a queue, a sleep, a REPL prompt), the walk runs
    here; when it is inside torch (a long backward) the report says so.
    Backward started by other threads is not waited for.
    """
    try:
        res = _on_main_thread(device, timeout)
        d = res.as_dict()
        if res.error:
            d["groups"].append({"kind": "other", "name": "holders walk failed",
                                "bytes": 0, "tensors": 0, "hint": res.error})
        if res.held is not None:
            d["held"] = res.held
        return d
    except Exception as e:
        return {"dev": 0, "total": 0, "skipped": 1, "took_ms": 0.0,
                "groups": [{"kind": "other", "name": "holders walk failed", "bytes": 0,
                            "tensors": 0, "hint": f"{type(e).__name__}: {e}"}]}


# ---- running on the main thread ----

_PENDING_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_pending: dict[int, Any] = {}  # callbacks not yet called: ctypes must keep them alive


def _on_main_thread(device: Any, timeout: float) -> HoldersResult:
    main = threading.main_thread()
    if threading.current_thread() is main or not main.is_alive():
        return holders(device)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work(_arg: Any) -> int:
        try:
            _pending.pop(id(cb), None)
            if not box.get("cancelled"):
                box["res"] = holders(device)
        except BaseException:
            pass
        finally:
            done.set()
        return 0

    cb = _PENDING_CB(work)
    _pending[id(cb)] = cb
    try:
        scheduled = ctypes.pythonapi.Py_AddPendingCall(cb, None) == 0
    except Exception:
        scheduled = False
    if not scheduled:
        _pending.pop(id(cb), None)
    if scheduled and done.wait(timeout):
        res = box.get("res")
        return res if res is not None else holders(device)
    box["cancelled"] = True
    if done.is_set() and "res" in box:
        return box["res"]
    if _main_is_parked(main):
        return holders(device)
    busy = (f"the main thread stayed inside torch (a backward, an optimizer step) for {timeout:g} s, "
            "and autograd writes .grad and graphs without the GIL meanwhile")
    return HoldersResult([HolderGroup(
        "other", "main thread busy", 0, 0, [],
        busy + "; ask again, or call gputop.holders() from the program")],
        0, 0, 0, str(device or _default_device()), 0.0,
        held={"t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
              "skipped": busy})


def _main_is_parked(main: threading.Thread) -> bool:
    """True when the main thread waits in C outside torch (an event loop, a
    queue, a sleep, a REPL prompt): no backward of its own is running then.
    Inside torch's Python code (backward, an optimizer step) it is busy."""
    try:
        frame = sys._current_frames().get(main.ident)  # type: ignore[arg-type]
    except Exception:
        return False
    if frame is None:
        return True  # no Python frame: a REPL prompt, or interpreter shutdown
    name = str(frame.f_globals.get("__name__", ""))
    return not (name == "torch" or name.startswith("torch."))


# ---- the walk ----

def _default_device() -> str:
    return os.environ.get(ENV_DEVICE, "").strip() or "cuda"


def _parse_device(device: Any) -> tuple[str, int | None]:
    if device is None:
        device = _default_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return "cuda", device
    s = str(device).strip().lower()
    if ":" in s:
        kind, _, idx = s.partition(":")
        try:
            return kind, int(idx)
        except ValueError:
            raise ValueError(f"holders: bad device {device!r} (want cuda, cuda:N or cpu)") from None
    return s, None


def _run(device: Any, top: int | None, collect: bool, max_items: int, t0: float,
         time_limit: float | None = None) -> HoldersResult:
    dev_type, dev_index = _parse_device(device)
    label = dev_type if dev_index is None else f"{dev_type}:{dev_index}"
    torch = sys.modules.get("torch")
    if torch is None:
        # not imported: no tensor can exist, and importing it costs seconds
        try:
            installed = importlib.util.find_spec("torch") is not None
        except Exception:
            installed = False
        return HoldersResult([], 0, 0, dev_index or 0, label, (time.perf_counter() - t0) * 1e3,
                             None if installed else "torch is not installed",
                             held=_no_tensors(dev_index or 0))
    dev = dev_index if dev_index is not None else 0
    if dev_type == "cuda":
        try:
            if not torch.cuda.is_initialized():
                # no CUDA tensor can exist before CUDA is initialised
                return HoldersResult([], 0, 0, dev, label, (time.perf_counter() - t0) * 1e3,
                                     held=_no_tensors(dev))
            if dev_index is None:
                dev = torch.cuda.current_device()
        except Exception:
            pass
    if collect:
        gc.collect()
    wait = 5.0 if time_limit is None else max(time_limit, 0.0)
    if not _walk_lock.acquire(timeout=wait):
        return HoldersResult([], 0, 0, dev, label, (time.perf_counter() - t0) * 1e3,
                             "another holders walk was running")
    deadline = None if time_limit is None else t0 + max(time_limit, 0.0)
    # the walk allocates tens of thousands of small objects: an automatic
    # full collection in the middle of it would double its time
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        w = _Walker(torch, dev_type, dev_index, max_items, deadline)
        try:
            groups = w.run()
            skipped = w.skipped
            held = w.held(dev)
        finally:
            w.close()  # drop every reference to user objects now, cycle or not
        del w
    finally:
        if was_enabled:
            gc.enable()
        _walk_lock.release()
    # what the allocator holds beyond the storages seen comes last: it is
    # no holder (workspaces, then what nothing accounts for)
    def last(g: HolderGroup) -> int:
        return 2 if g.name == UNREACHABLE else 1 if g.kind == "torch_internal" else 0

    groups.sort(key=lambda g: (last(g), -g.bytes, g.kind, g.name))
    tail = [g for g in groups if last(g)]
    groups = [g for g in groups if not last(g)]
    if top is not None and top >= 0 and len(groups) > top:
        rest = groups[top:]
        groups = groups[:top]
        groups.append(HolderGroup("other", f"{len(rest)} more groups",
                                  sum(g.bytes for g in rest), sum(g.tensors for g in rest),
                                  [], "smaller holders; holders(top=None) lists them all"))
    if held is not None and not held.get("skipped"):
        top_groups = [g for g in groups if g.tensors and g.bytes][:3]
        held["top"] = [g.as_dict() for g in top_groups]
    groups += tail
    total = sum(g.bytes for g in groups)
    return HoldersResult(groups, total, skipped, dev, label, (time.perf_counter() - t0) * 1e3,
                         held=held)


_walk_lock = threading.RLock()  # reentrant: a pending call may land inside a walk

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


class _Group:
    __slots__ = ("cat", "name", "kind", "meta", "members")

    def __init__(self, cat: str, name: str) -> None:
        self.cat = cat
        self.name = name
        self.kind = _KIND.get(cat, "container")
        self.meta: dict[str, Any] = {}
        self.members: list[tuple[int, Any, str, str]] = []  # (bytes, tensor, role, label)


class _Walker:
    def __init__(self, torch: Any, dev_type: str, dev_index: int | None, max_items: int,
                 deadline: float | None = None) -> None:
        self.torch = torch
        self.deadline = deadline  # perf_counter() past which the walk stops
        self.cut = ""  # why the walk stopped early ("" while it has not)
        # device -> the attribution of its allocated bytes (remainder())
        self.partition: dict[int, dict[str, Any]] = {}
        self.dev_type = dev_type
        self.dev_index = dev_index
        self.cuda = dev_type == "cuda"
        self.max_items = max(1, int(max_items))
        self.skipped = 0
        self.t0 = time.perf_counter()
        self.visits = 0
        self.seq = 0
        self.groups: list[_Group] = []
        self.gindex: dict[tuple[str, str], int] = {}
        self.claims: dict[Any, list[Any]] = {}  # storage key -> [prio, gid, tensor, role, label]
        self.sizes: dict[Any, int] = {}
        self.tkeys: dict[int, list[Any]] = {}  # id(tensor) -> storage keys (tensor kept in keep)
        self.seen: set[int] = set()
        self.nodes_seen: set[int] = set()
        self.keep: list[Any] = []  # everything whose id() is remembered stays alive meanwhile
        self.tcache: dict[type, int] = {}
        self.ttypes_seen: set[type] = set()
        self.slot_cache: dict[type, list[tuple[str, Any, type]]] = {}
        self.saved_names: dict[type, tuple[str, ...]] = {}
        self.param_owner: dict[int, int] = {}  # id(param) -> module group
        self.opt_params: dict[int, set[int]] = {}  # optimizer group -> param ids
        self.cleared: list[Any] = []  # frame locals snapshots to empty afterwards
        self.queue: collections.deque[tuple[Any, ...]] = collections.deque()
        nn = getattr(torch, "nn", None)
        self.Module = getattr(nn, "Module", None)
        optim = getattr(torch, "optim", None)
        self.Optimizer = getattr(optim, "Optimizer", None)
        try:
            from torch.autograd.graph import Node
            self.Node: Any = Node
        except Exception:
            self.Node = None
        saved = getattr(getattr(torch._C, "_autograd", None), "SavedTensor", None)
        self.SavedTensor = saved
        self.raw_saved = saved is not None and hasattr(saved, "data") and hasattr(saved, "unpack_hook")
        self.atom_types: set[Any] = set(_ATOMS)
        for name in ("dtype", "device", "Size", "Generator", "finfo", "iinfo", "layout",
                     "memory_format", "qscheme"):
            tp = getattr(torch, name, None)
            if isinstance(tp, type):
                self.atom_types.add(tp)

    def close(self) -> None:
        for g in self.groups:
            g.members = []
        for d in (self.claims, self.tkeys, self.gindex, self.tcache, self.saved_names,
                  self.param_owner, self.opt_params):
            d.clear()
        self.keep = []
        self.queue.clear()
        self.groups = []

    # -- bookkeeping --

    def group(self, cat: str, name: str) -> int:
        key = (cat, name)
        gid = self.gindex.get(key)
        if gid is None:
            gid = len(self.groups)
            self.groups.append(_Group(cat, name))
            self.gindex[key] = gid
        return gid

    def tclass(self, tp: type) -> int:
        c = self.tcache.get(tp)
        if c is None:
            c = self._classify(tp)
            self.tcache[tp] = c
        return c

    def _classify(self, tp: type) -> int:
        try:
            if tp in self.atom_types:
                return _T_ATOM
            if issubclass(tp, self.torch.Tensor):
                return _T_TENSOR
            if self.Module is not None and issubclass(tp, self.Module):
                return _T_MODULE
            if self.Optimizer is not None and issubclass(tp, self.Optimizer):
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
            if self.Node is not None and issubclass(tp, self.Node):
                return _T_NODE
            if issubclass(tp, _OPAQUE) or issubclass(tp, (str, bytes, int, float)):
                return _T_SKIP
            mod = str(getattr(tp, "__module__", "") or "")
            if mod.startswith(_SKIP_PREFIXES) and not mod.startswith(_WALK_TYPES_FROM):
                return _T_SKIP
            return _T_OBJ
        except Exception:
            return _T_SKIP

    def budget(self) -> bool:
        if self.cut:
            return False
        self.visits += 1
        if self.visits > MAX_VISITS:
            self.skipped += 1
            return False
        if self.deadline is not None and not self.visits & 1023 and time.perf_counter() > self.deadline:
            self.stop()
            return False
        return True

    def stop(self) -> None:
        limit = max((self.deadline or self.t0) - self.t0, 0.0)
        self.cut = (f"the holders walk took longer than its {limit:.1f} s limit and was stopped "
                    f"after {self.visits} objects (gputop.snapshot(label, verdict=False) skips it)")

    def late(self) -> bool:
        """Past the deadline: the walk stops (and says so)."""
        if not self.cut and self.deadline is not None and time.perf_counter() > self.deadline:
            self.stop()
        return bool(self.cut)

    def items(self, obj: Any, c: int) -> list[tuple[str, Any]]:
        """(sub-path, value) of a container, at most max_items, read in one C
        call each so another thread's mutation cannot break the iteration."""
        n = self.max_items
        if c == _T_DICT:
            try:
                total = dict.__len__(obj)
                got = list(itertools.islice(dict.items(obj), n))
            except Exception:
                self.skipped += 1
                return []
            if total > n:
                self.skipped += total - n
            out = []
            for k, v in got:
                if type(v) in self.atom_types:
                    continue
                out.append((f"[{_key_repr(k)}]", v))
            return out
        try:
            if isinstance(obj, list):
                total = list.__len__(obj)
                got = list.__getitem__(obj, slice(0, n))
            elif isinstance(obj, tuple):
                total = tuple.__len__(obj)
                got = tuple.__getitem__(obj, slice(0, n))
            elif isinstance(obj, collections.deque):
                total = len(obj)
                got = list(itertools.islice(collections.deque.__iter__(obj), n))
            elif isinstance(obj, (set, frozenset)):
                total = len(obj)
                it = set.__iter__(obj) if isinstance(obj, set) else frozenset.__iter__(obj)
                got = list(itertools.islice(it, n))
            else:
                return []
        except Exception:
            self.skipped += 1
            return []
        if total > n:
            self.skipped += total - n
        atoms = self.atom_types
        return [(f"[{i}]", v) for i, v in enumerate(got) if type(v) not in atoms]

    def attrs(self, obj: Any) -> list[tuple[str, Any]]:
        """Instance attributes from __dict__ and __slots__, never through
        __getattr__ or properties."""
        out: list[tuple[str, Any]] = []
        try:
            d = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            d = None
        except Exception:
            self.skipped += 1
            d = None
        if isinstance(d, dict):
            try:
                total = dict.__len__(d)
                got = list(itertools.islice(dict.items(d), self.max_items))
            except Exception:
                self.skipped += 1
                got, total = [], 0
            if total > self.max_items:
                self.skipped += total - self.max_items
            atoms = self.atom_types
            out.extend((f".{k}", v) for k, v in got if type(v) not in atoms)
        slots = self.slot_cache.get(type(obj))
        if slots is None:
            slots = self.slot_cache[type(obj)] = _slot_descriptors(type(obj))
        for name, desc, cls in slots:
            try:
                v = desc.__get__(obj, cls)
            except AttributeError:
                continue  # an empty slot
            except Exception:
                self.skipped += 1
                continue
            if type(v) not in self.atom_types:
                out.append((f".{name}", v))
        return out

    def keys_of(self, t: Any) -> list[Any]:
        """Storage keys of t on the walked device ([] when elsewhere / empty)."""
        tid = id(t)
        got = self.tkeys.get(tid)
        if got is not None:
            return got
        self.keep.append(t)
        keys: list[Any] = []
        try:
            if self.cuda:
                on = t.is_cuda
                idx = t.get_device() if on else -1
            else:
                d = t.device
                on = d.type == self.dev_type
                idx = d.index if d.index is not None else 0
            if on and (self.dev_index is None or idx == self.dev_index):
                if t.layout is self.torch.strided:
                    parts = [t]
                else:
                    parts = _sparse_parts(t)
                for p in parts:
                    st = p.untyped_storage()
                    ptr = st.data_ptr()
                    n = st.nbytes()
                    if ptr and n:
                        key = (idx, ptr)
                        if key not in self.sizes:
                            if self.cuda:
                                n = -(-n // CUDA_BLOCK) * CUDA_BLOCK
                            self.sizes[key] = n
                        keys.append(key)
        except Exception:
            self.skipped += 1
            keys = []
        self.tkeys[tid] = keys
        self.ttypes_seen.add(type(t))
        return keys

    def claim(self, t: Any, gid: int, prio: int, role: str, label: str) -> bool:
        keys = self.keys_of(t)
        for key in keys:
            c = self.claims.get(key)
            if c is None or prio < c[0]:
                self.claims[key] = [prio, gid, t, role, label]
        return bool(keys)

    def prio(self, root: int, level: int, view: bool = False) -> int:
        """Lower wins: the root class first, then the level, then a tensor
        that owns its storage over a view of it, then the first found."""
        self.seq += 1
        return root * 1_000_000_000_000 + level * 10_000_000_000 + view * 5_000_000_000 + self.seq

    # -- tensors, graphs --

    def tensor(self, t: Any, gid: int, root: int, level: int, role: str, label: str,
               grad_gid: int | None = None) -> None:
        view = False
        if role in ("direct", "item"):
            try:
                view = bool(t._is_view())
            except Exception:
                view = False
        on = self.claim(t, gid, self.prio(root, level, view), role, label)
        try:
            if not t.requires_grad:
                return
            if t.is_leaf:
                g = t.grad
                if g is not None:
                    self.claim(g, gid if grad_gid is None else grad_gid,
                               self.prio(root, level + 1), "grad", label)
            else:
                fn = t.grad_fn
                if fn is not None:
                    if on and role in ("direct", "item"):
                        self.groups[gid].meta.setdefault("gradfn", set()).add(id(t))
                    self.graph(fn, gid, root, label)
        except Exception:
            self.skipped += 1

    def graph(self, fn: Any, gid: int, root: int, label: str) -> None:
        stack = [fn]
        seen = self.nodes_seen
        while stack:
            node = stack.pop()
            nid = id(node)
            if nid in seen:
                continue
            seen.add(nid)
            self.keep.append(node)
            if not self.budget():
                self.skipped += len(stack)
                return
            tp = type(node)
            names = self.saved_names.get(tp)
            if names is None:
                names = self._saved_names(tp)
            for a in names:
                try:
                    v = getattr(node, a)
                except Exception:
                    continue  # freed by backward, or not readable
                self.saved(v, gid, root, label)
            var = None
            if tp.__name__ == "AccumulateGrad":
                try:
                    var = node.variable
                except Exception:
                    var = None
            if var is not None:
                self.tensor(var, gid, root, _P_GRAPH, "gparam", label)
            try:
                d = object.__getattribute__(node, "__dict__")  # custom Function ctx attributes
            except Exception:
                d = None
            if isinstance(d, dict) and d:
                for v in list(d.values())[: self.max_items]:
                    if self.tclass(type(v)) == _T_TENSOR:
                        self.tensor(v, gid, root, _P_GRAPH, "graph", label)
            try:
                nf = node.next_functions
            except Exception:
                continue
            for f, _ in nf:
                if f is not None and id(f) not in seen:
                    stack.append(f)

    def _saved_names(self, tp: type) -> tuple[str, ...]:
        names: tuple[str, ...] = ()
        if self.raw_saved:
            try:
                names = tuple(a for a in dir(tp) if a.startswith("_raw_saved_"))
            except Exception:
                names = ()
        self.saved_names[tp] = names
        return names

    def saved(self, v: Any, gid: int, root: int, label: str) -> None:
        st = self.SavedTensor
        if isinstance(v, (list, tuple)):
            for x in v[: self.max_items]:
                self.saved(x, gid, root, label)
            return
        if st is None or type(v) is not st:
            return
        try:
            data = v.data  # the stored tensor, or what a pack hook returned; never unpacks
        except Exception:
            return
        if data is None:
            return  # freed by backward
        c = self.tclass(type(data))
        if c == _T_TENSOR:
            self.tensor(data, gid, root, _P_GRAPH, "graph", label)
            self.groups[gid].meta["graph"] = True
        elif c in (_T_SEQ, _T_DICT):
            for _, x in self.items(data, c):
                if self.tclass(type(x)) == _T_TENSOR:
                    self.tensor(x, gid, root, _P_GRAPH, "graph", label)
                    self.groups[gid].meta["graph"] = True

    # -- modules, optimizers --

    def ngroup(self, cat: str, path: str, suffix: str, name: str | None = None) -> int:
        """A group for a named holder; suffix " in f()" marks a running function's local."""
        gid = self.group(cat, name if name is not None else path + suffix)
        meta = self.groups[gid].meta
        meta["path"] = path
        if suffix:
            meta["local"] = suffix.strip()
        return gid

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

    def reaches(self, level: list[Any], hops: int) -> bool:
        """Could the walk find anything below these items? Answered level by
        level with gc.get_referents and type sets, all in C, so a list of
        100,000 records costs milliseconds instead of a visit each. Follows
        every edge the walk would (and more: dict keys), so False is safe."""
        expandable = (_T_DICT, _T_SEQ, _T_OBJ)
        for k in range(max(0, hops) + 1):
            tset = set(map(type, level))
            grow = set()
            for tp in tset:
                c = self.tclass(tp)
                if c in _FINDS:
                    return True
                if c in expandable:
                    grow.add(tp)
            if k == hops or not grow:
                return False
            nxt = list(itertools.compress(level, map(grow.__contains__, map(type, level))))
            try:
                level = gc.get_referents(*nxt)
            except Exception:
                return True
            if len(level) > PREFILTER_FRONTIER:
                return True
        return False

    # -- the breadth-first walk from one class of roots --

    def drain(self) -> None:
        """Process the queue. Entry: (obj, path, depth, tgroup, in_container,
        root, single gid or None, label, suffix)."""
        q = self.queue
        atoms = self.atom_types
        while q:
            obj, path, depth, tgroup, inside, root, single, label, suffix = q.popleft()
            tp = type(obj)
            if tp in atoms:
                continue
            c = self.tclass(tp)
            if c == _T_SKIP or c == _T_ATOM:
                continue
            if c == _T_TENSOR:
                if single is not None:
                    gid = single
                else:
                    gid = self.ngroup("items" if inside else "tensor",
                                      tgroup if inside else path, suffix)
                self.tensor(obj, gid, root, _P_ITEM if inside else _P_DIRECT,
                            "item" if inside else "direct", label)
                continue
            oid = id(obj)
            if oid in self.seen:
                continue
            if not self.budget():
                continue
            if c == _T_MODULE:
                self.module(obj, path, root, single, label, depth, suffix)
                continue
            self.seen.add(oid)
            self.keep.append(obj)
            if c == _T_OPTIM:
                self.optimizer(obj, path, root, single, label, suffix)
            elif c in (_T_EXC, _T_TB, _T_FRAME):
                gid = single if single is not None else self.ngroup("traceback", path, suffix)
                if c == _T_EXC:
                    self.exception(obj, gid, root, label)
                elif c == _T_TB:
                    self.seen.discard(oid)
                    self.traceback(obj, gid, root, label)
                else:
                    self.seen.discard(oid)
                    self.frame(obj, gid, root, label)
            elif c == _T_NODE:
                gid = single if single is not None else self.ngroup("tensor", path, suffix)
                self.graph(obj, gid, root, label)
            elif depth < MAX_DEPTH:
                if c == _T_DICT or c == _T_SEQ:
                    sub = self.items(obj, c)
                    if len(sub) > PREFILTER_ITEMS and not self.reaches(
                            [v for _, v in sub], MAX_DEPTH - depth - 1):
                        continue
                    ntg = tgroup if inside else path
                    for k, v in sub:
                        q.append((v, path + k, depth + 1, ntg, True, root, single, label, suffix))
                else:
                    for k, v in self.attrs(obj):
                        q.append((v, path + k, depth + 1, tgroup, inside, root, single, label,
                                  suffix))

    # -- roots --

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
            # then every tensor object gc tracks: those no root reached
            if not self.late():
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
        if lost >= REFERRER_MIN_BYTES or lost * 100 >= sum(self.sizes.values()):
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

    # -- results --

    def finish(self) -> list[HolderGroup]:
        for key, (_, gid, t, role, label) in self.claims.items():
            self.groups[gid].members.append((self.sizes.get(key, 0), t, role, label))
        out: list[HolderGroup] = []
        # which optimizers share parameters with which module groups
        mod_opts: dict[int, list[str]] = {}
        for ogid, pids in self.opt_params.items():
            og = self.groups[ogid]
            if og.cat != "optim":
                continue
            for gid in {self.param_owner[p] for p in pids if p in self.param_owner}:
                mod_opts.setdefault(gid, []).append(og.meta.get("path", og.name))
        for gid, g in enumerate(self.groups):
            if not g.members:
                continue
            g.meta["opts"] = mod_opts.get(gid, [])
            nbytes = sum(m[0] for m in g.members)
            kind = g.kind
            if g.cat == "tensor":
                graph = _has_role(g, "graph") or _has_role(g, "gparam")
                kind = "autograd_graph" if g.meta.get("gradfn") and graph else "variable"
            elif g.cat == "items":
                kind = "container"
            g.kind = kind
            out.append(HolderGroup(kind, g.name, nbytes, len(g.members), _examples(g.members),
                                   _hint(g, self)))
        return out

    def remainder(self, torch: Any) -> list[HolderGroup]:
        """What the allocator holds beyond the storages seen: torch's
        cuBLAS/cuBLASLt workspaces, and what nothing accounts for. Each
        live block of a device's allocator is counted once, as owned by a
        storage the walk saw (Python's share), as a workspace (a block of
        the size torch gives them that no storage owns), or as neither;
        the three shares are kept per device for held()."""
        src = _stats.source()
        if not self.cuda and isinstance(src, _stats.TorchSource):
            return []  # a CPU walk: torch's allocator is CUDA's
        try:
            if self.dev_index is not None:
                devs = {self.dev_index}
            elif self.cuda:  # only devices this process uses: asking others could wake them
                devs = {k[0] for k in self.sizes} | {torch.cuda.current_device()}
            else:
                devs = {k[0] for k in self.sizes} | {0}
        except Exception:
            return []
        internal = unaccounted = workspaces = 0
        for d in sorted(devs):
            try:
                part = _partition(src, d, sorted(ptr for (i, ptr) in self.sizes if i == d),
                                  sum(n for (i, _), n in self.sizes.items() if i == d))
            except Exception:
                continue
            self.partition[d] = part
            internal += part["internal"]
            unaccounted += part["unaccounted"]
            workspaces += part.get("workspaces", 0)
        out = []
        if internal:
            out.append(HolderGroup(
                "torch_internal", WORKSPACES, internal, 0, [],
                f"{workspaces} workspace{'s' if workspaces != 1 else ''} torch keeps for each thread and "
                "stream that ran a matmul: not a leak; gputop.cleanup() frees them "
                "(torch._C._cuda_clearCublasWorkspaces)"))
        if unaccounted >= CUDA_BLOCK:
            out.append(HolderGroup(
                "other", UNREACHABLE, unaccounted, 0, [],
                "allocated, but no Python-visible tensor owns it and it is no cuBLAS workspace: "
                "autograd graphs and C++ caches nothing named reaches, CUDA graph pools, tensors "
                "only native code holds; gputop.cleanup() frees what is garbage"))
        return out

    def held(self, dev: int) -> dict[str, Any] | None:
        """The attribution of device dev (wire.Held without t / took_ms /
        top), or why there is none; None when its allocator was not read."""
        if self.cut:
            return {"skipped": self.cut}
        part = self.partition.get(dev)
        return dict(part) if part is not None else None


def _partition(src: Any, dev: int, ptrs: list[int], seen_bytes: int) -> dict[str, Any]:
    """Device dev's allocated bytes split by owner: python (blocks that hold
    a storage at one of ptrs, sorted), internal (cuBLAS/cuBLASLt workspaces)
    and unaccounted. Without the allocator's blocks, Python's share is the
    storages' bytes and the rest of the allocated counter is unaccounted."""
    blocks = src.blocks(dev)
    if blocks is None:
        alloc = int(src.read(dev).allocated)
        py = min(seen_bytes, alloc)
        return {"allocated": alloc, "python": py, "internal": 0, "unaccounted": alloc - py}
    sizes = src.workspace_sizes(dev)
    py = internal = unacc = n = 0
    for addr, size, requested in blocks:
        i = bisect.bisect_left(ptrs, addr)
        if i < len(ptrs) and ptrs[i] < addr + size:
            py += size
        elif requested in sizes:
            internal += size
            n += 1
        else:
            unacc += size
    return {"allocated": py + internal + unacc, "python": py, "internal": internal,
            "workspaces": n, "unaccounted": unacc}


def _no_tensors(dev: int) -> dict[str, Any] | None:
    """The attribution of a device on which no tensor can exist (torch not
    imported, CUDA not initialised): whatever the allocator counts is
    unaccounted."""
    try:
        return _partition(_stats.source(), dev, [], 0)
    except Exception:
        return None


def held_at(dev: int, limit: float | None = None) -> dict[str, Any]:
    """The attribution of an end row on torch device dev (wire.Held): a
    holders walk of that device in the caller's thread, stopped after limit
    seconds (default WALK_LIMIT_S). Never raises."""
    t = time.time_ns()
    if limit is None:
        limit = WALK_LIMIT_S
    try:
        kind = _parse_device(None)[0]
        return holders(device=f"{kind}:{int(dev)}", time_limit=limit).held or {"t": t, "skipped": "no attribution"}
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return {"t": t, "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                "skipped": f"the holders walk failed: {type(e).__name__}: {e}"}


def holds_device_tensors(obj: Any, device: Any = None, max_items: int = MAX_ITEMS) -> bool:
    """True when obj is, contains, or keeps alive (modules, optimizers,
    autograd graphs, exception frames) a tensor on device. Never raises."""
    try:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        dev_type, dev_index = _parse_device(device)
        if dev_type == "cuda" and not torch.cuda.is_initialized():
            return False
        w = _Walker(torch, dev_type, dev_index, max_items)
        gid = w.group("history", "probe")
        w.queue.append((obj, "obj", 0, None, False, 0, gid, "obj", ""))
        try:
            w.drain()
            return bool(w.claims)
        finally:
            for d in w.cleared:
                try:
                    dict.clear(d)
                except Exception:
                    pass
            w.close()
    except Exception:
        return False


# ---- helpers ----

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


def _key_repr(k: Any) -> str:
    if isinstance(k, (str, int)):
        return repr(k)
    try:
        r = repr(k) if type(k).__repr__ in (object.__repr__, tuple.__repr__) else type(k).__name__
    except Exception:
        r = "?"
    return r if len(r) <= 40 else r[:37] + "..."


def _sparse_parts(t: Any) -> list[Any]:
    parts = []
    for a in ("_indices", "_values", "crow_indices", "col_indices", "ccol_indices",
              "row_indices", "values"):
        f = getattr(t, a, None)
        if f is None:
            continue
        try:
            parts.append(f())
        except Exception:
            continue
        if a == "_values":
            break
    return parts


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


def _has_role(g: _Group, role: str) -> bool:
    return any(m[2] == role for m in g.members)


def _desc(t: Any) -> str:
    try:
        dt = str(t.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(str(int(s)) for s in t.shape)}]"
    except Exception:
        return "?"


def _examples(members: list[tuple[int, Any, str, str]]) -> list[str]:
    out: list[str] = []
    for _, t, _, _ in sorted(members, key=lambda m: -m[0]):
        d = _desc(t)
        if d not in out:
            out.append(d)
        if len(out) == 3:
            break
    return out


def _del_stmt(paths: list[str]) -> str:
    return "del " + ", ".join(paths)


def _hint(g: _Group, w: _Walker) -> str:
    m = g.meta
    n = len(g.members)
    path = m.get("path", g.name)
    local = m.get("local")  # "in train()": a local of a function still running
    gone = f"; released when {local[3:]} returns" if local else ""
    dev = "CUDA" if w.cuda else w.dev_type
    if g.cat == "module":
        cls = m.get("cls", "module")
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


def format_bytes(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def format_table(res: HoldersResult, top: int | None = None) -> str:
    head = (f"gputop holders on {res.device}: {format_bytes(res.total)} in "
            f"{len(res.groups)} group{'s' if len(res.groups) != 1 else ''}"
            f" ({res.took_ms:.1f} ms, {res.skipped} skipped)")
    lines = [head]
    if res.error:
        lines.append(f"  walk failed: {res.error}")
    groups = res.groups if top is None else res.groups[:top]
    if not groups:
        if not res.error:
            lines.append(f"  nothing holds {res.device} memory")
        return "\n".join(lines)
    rows = [(format_bytes(g.bytes), str(g.tensors), g.kind, g.name, ", ".join(g.examples[:2]))
            for g in groups]
    hdr = ("BYTES", "TENSORS", "KIND", "HOLDER", "EXAMPLES")
    wid = [max(len(hdr[i]), *(len(r[i]) for r in rows)) for i in range(4)]
    fmt = f"  {{:>{wid[0]}}}  {{:>{wid[1]}}}  {{:<{wid[2]}}}  {{:<{wid[3]}}}  {{}}"
    lines.append(fmt.format(*hdr).rstrip())
    for g, r in zip(groups, rows):
        lines.append(fmt.format(*r).rstrip())
        if g.hint:
            lines.append(f"  {'':>{wid[0]}}  -> {g.hint}")
    if top is not None and len(res.groups) > top:
        lines.append(f"  ... {len(res.groups) - top} more")
    return "\n".join(lines)
