"""The holders walker: one object per walk that follows references from its
roots (_roots), reads containers and attributes without running user code,
finds each tensor's storages on the walked device, follows autograd graphs
and gives every storage to the most specific owner that reaches it (_owners
for modules, optimizers and frames); then it builds the groups with their
hints (_hints) and the device's attribution (_attribution).

The walker's methods are kept in those modules as mixins of one class, so
that each stays one concern and a call costs what it cost before the split.
"""

from __future__ import annotations

import collections
import gc
import itertools
import time
from typing import Any

from ._attribution import CUDA_BLOCK, _Attribution
from ._classify import (_ATOMS, _FINDS, _P_DIRECT, _P_GRAPH, _P_ITEM, _T_ATOM, _T_DICT,
                        _T_EXC, _T_FRAME, _T_MODULE, _T_NODE, _T_OBJ, _T_OPTIM, _T_SEQ, _T_SKIP,
                        _T_TB, _T_TENSOR, _slot_descriptors, classify)
from . import _frameworks
from ._format import _examples
from ._group import _Group
from ._hints import _has_role, _hint
from ._ledger import ACTIVATIONS, GRADS, OPTIMIZER, OTHER, PARAMS
from ._owners import _Owners
from ._result import HolderGroup
from ._roots import _Roots

MAX_ITEMS = 10_000  # items read from one container; the rest is counted as skipped
MAX_DEPTH = 3  # attribute / item hops from a variable
MAX_VISITS = 500_000  # objects and graph nodes examined in one walk
MAX_INNER = 4  # levels of a tensor subclass's inner tensors (__tensor_flatten__) followed
PREFILTER_ITEMS = 64  # a container this long is first checked in C for anything to find
PREFILTER_FRONTIER = 1_000_000  # objects that check may hold at once before giving up

# the ledger's part of a storage reached in each role (a .grad's depends on
# whose it is: tensor())
_PART = {"param": PARAMS, "oparam": PARAMS, "state": OPTIMIZER, "graph": ACTIVATIONS}


class _Walker(_Roots, _Owners, _Attribution):
    """One walk's state: what it has seen, the groups, and for each storage
    on the walked device the owner that claimed it with the best priority."""

    def __init__(self, torch: Any, dev_type: str, dev_index: int | None, max_items: int,
                 deadline: float | None = None, devs: Any = (), name_rest: bool = True) -> None:
        self.torch = torch
        # guess the referrers of tensors no root reached (a gc pass: a row
        # that only wants its ledger has no use for the names)
        self.name_rest = name_rest
        self.deadline = deadline  # perf_counter() past which the walk stops
        self.cut = ""  # why the walk stopped early ("" while it has not)
        self.over_visits = False  # MAX_VISITS reached: references past it not followed
        # device -> the attribution of its allocated bytes (remainder())
        self.partition: dict[int, dict[str, Any]] = {}
        # device -> its ledger's figures and notes (remainder())
        self.ledgers: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self.want = {int(d) for d in devs}  # devices to attribute besides those seen
        # device -> (live blocks, workspace sizes) read by explained(), for remainder()
        self.read_blocks: dict[int, tuple[Any, set[int]]] = {}
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
        self.sizes: dict[Any, int] = {}  # storage key -> bytes as the allocator rounds them
        self.nbytes: dict[Any, int] = {}  # storage key -> its bytes
        self.parts: dict[Any, int] = {}  # storage key -> the first ledger part that claimed it
        # device (-1: none, meta) -> tensor type -> tensors with no memory of their own
        self.no_memory: dict[int, dict[str, int]] = {}
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
        self.trainers: dict[str, str] = {}  # a variable holding a framework's Trainer -> what it is
        self.queue: collections.deque[tuple[Any, ...]] = collections.deque()
        nn = getattr(torch, "nn", None)
        self.Module = getattr(nn, "Module", None)
        self.Parameter = getattr(nn, "Parameter", ())  # () : isinstance is always False
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
                  self.param_owner, self.opt_params, self.parts):
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
            c = classify(self, tp)
            self.tcache[tp] = c
        return c

    def budget(self) -> bool:
        if self.cut:
            return False
        self.visits += 1
        if self.visits > MAX_VISITS:
            self.skipped += 1
            self.over_visits = True
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
            if not on and t.is_meta:
                self.memoryless(-1, t)  # on no device: said in every ledger
            elif on and (self.dev_index is None or idx == self.dev_index):
                self.storage_keys(t, idx, keys, 0)
        except Exception:
            self.skipped += 1
            keys = []
        self.tkeys[tid] = keys
        self.ttypes_seen.add(type(t))
        return keys

    def storage_keys(self, t: Any, idx: int, keys: list[Any], level: int) -> None:
        """Append the keys of t's storages on device idx: a sparse tensor's
        parts, a tensor subclass's inner tensors (DTensor, Float8: their
        own storage holds nothing)."""
        parts = [t] if t.layout is self.torch.strided else _sparse_parts(t)
        for p in parts:
            st = p.untyped_storage()
            n = st.nbytes()
            if not n:
                continue
            ptr = 0
            if st.device.type != "meta":  # a meta storage (FakeTensor) has none: data_ptr() would warn
                try:
                    ptr = st.data_ptr()
                except RuntimeError:
                    ptr = 0  # a wrapper subclass's storage
            if not ptr:
                inner = _inner_tensors(p) if level < MAX_INNER else []
                for x in inner:
                    self.keep.append(x)
                    self.storage_keys(x, idx, keys, level + 1)
                if not inner:
                    self.memoryless(idx, p)
                continue
            key = (idx, ptr)
            if key not in self.sizes:
                self.sizes[key] = -(-n // CUDA_BLOCK) * CUDA_BLOCK if self.cuda else n
            if n > self.nbytes.get(key, 0):
                self.nbytes[key] = n
            keys.append(key)

    def memoryless(self, idx: int, t: Any) -> None:
        kinds = self.no_memory.setdefault(idx, {})
        name = "meta" if t.is_meta else type(t).__name__
        kinds[name] = kinds.get(name, 0) + 1

    def claim(self, t: Any, gid: int, prio: int, role: str, label: str, part: int | None = None) -> bool:
        """Give t's storages to group gid unless a better-placed owner has
        them; their ledger part is the first one in the part order that
        reaches them, whoever owns them."""
        keys = self.keys_of(t)
        if part is None:
            part = _PART.get(role, OTHER)
        parts = self.parts
        for key in keys:
            c = self.claims.get(key)
            if c is None or prio < c[0]:
                self.claims[key] = [prio, gid, t, role, label]
            if part < parts.get(key, OTHER + 1):
                parts[key] = part
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
        # a parameter reached any way (a module no root reaches, a graph's
        # AccumulateGrad, a view of it saved for backward) is one
        param = role in ("param", "oparam") or isinstance(t, self.Parameter)
        if not param:
            try:
                param = isinstance(t._base, self.Parameter)
            except Exception:
                pass
        on = self.claim(t, gid, self.prio(root, level, view), role, label, PARAMS if param else None)
        try:
            if not t.requires_grad:
                return
            if t.is_leaf:
                g = t.grad
                if g is not None:
                    self.claim(g, gid if grad_gid is None else grad_gid,
                               self.prio(root, level + 1), "grad", label, GRADS if param else OTHER)
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

    # -- named holders --

    def ngroup(self, cat: str, path: str, suffix: str, name: str | None = None) -> int:
        """A group for a named holder; suffix " in f()" marks a running function's local."""
        gid = self.group(cat, name if name is not None else path + suffix)
        meta = self.groups[gid].meta
        meta["path"] = path
        if suffix:
            meta["local"] = suffix.strip()
        return gid

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
            if c == _T_OBJ and depth == 0 and not inside:
                kind = _frameworks.trainer(tp)
                if kind:
                    self.trainers[path + suffix] = kind
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
        compiled = _frameworks.compiled()
        for gid, g in enumerate(self.groups):
            if not g.members:
                continue
            g.meta["opts"] = mod_opts.get(gid, [])
            path = g.meta.get("path", "")
            var = path.split(".")[0].split("[")[0] + (f" {g.meta['local']}" if g.meta.get("local") else "")
            if var in self.trainers and path != var.split(" ")[0]:
                g.meta["trainer"] = (var.split(" ")[0], self.trainers[var])
            if g.cat == "other" and compiled and all(isinstance(m[1], self.Parameter) for m in g.members):
                g.meta["compiled"] = True
            nbytes = sum(m[0] for m in g.members)
            kind = g.kind
            if g.cat == "tensor":
                graph = _has_role(g, "graph") or _has_role(g, "gparam")
                kind = "autograd_graph" if g.meta.get("gradfn") and graph else "variable"
            elif g.cat == "items":
                kind = "container"
            g.kind = kind
            out.append(HolderGroup(kind, g.name, nbytes, len(g.members), _examples(g.members),
                                   _hint(g, "CUDA" if self.cuda else self.dev_type)))
        return out


def _key_repr(k: Any) -> str:
    if isinstance(k, (str, int)):
        return repr(k)
    try:
        r = repr(k) if type(k).__repr__ in (object.__repr__, tuple.__repr__) else type(k).__name__
    except Exception:
        r = "?"
    return r if len(r) <= 40 else r[:37] + "..."


def _inner_tensors(t: Any) -> list[Any]:
    """The tensors a tensor subclass wraps (its __tensor_flatten__), [] for
    any other tensor."""
    flatten = getattr(type(t), "__tensor_flatten__", None)
    if flatten is None:
        return []
    try:
        names = flatten(t)[0]
        return [x for x in (getattr(t, n, None) for n in names) if x is not None and x is not t]
    except Exception:
        return []


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
