"""torch's allocator layout in figures: the segments of torch's memory
snapshot summed per device (wire.Layout: segments, blocks, free bytes in
segments, the largest free block, per memory pool), the kind of each pool
told from torch's pool id, and the allocator settings in force
(wire.AllocSettings), as torch reports them or else as the variable torch
reads asks for them.

TorchBackend reads with a Reader made of torch's calls (_torch.layout_reader
picks them); the tests' fake GPU, which stands in for torch's allocator,
makes one of its own. Nothing here calls torch: the calls are given, and
nothing here raises but what they raise.

Pool ids (c10/cuda/MemPool.cpp, CUDAGraph.cpp): (0, 0) is the default
pool. A CUDA graph captured without a pool gets (N, 0), N counting up
from 1 (MemPool::graph_pool_handle(is_user_created=false); before MemPool,
the capture's id). torch.cuda.graph_pool_handle() (which torch.compile's
CUDA-graph trees and make_graphed_callables share among their graphs) and
torch.cuda.MemPool() both take (0, N) from one counter, so such a pool is
"private" where torch has MemPool, and a graph's where it has not.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping, Sequence

# wire/limits.go
MAX_POOLS = 32
MAX_SETTINGS = 32
MAX_SETTING_BYTES = 256
MAX_POOL_ID_BYTES = 48

# the variables torch reads its allocator settings from, first set wins:
# PYTORCH_ALLOC_CONF since torch's AcceleratorAllocatorConfig (it keeps
# PYTORCH_CUDA_ALLOC_CONF with a lower priority); only the latter before
ENV_ORDER = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
OLD_ENV_ORDER = ("PYTORCH_CUDA_ALLOC_CONF",)
_CONF_KEYS = frozenset(ENV_ORDER)
CONF_PARSED = 8192  # the most of a settings string that is parsed


def clip(s: str, limit: int = MAX_SETTING_BYTES) -> str:
    """s cut to at most limit bytes of UTF-8 (then ending in "…")."""
    b = s.encode("utf-8", "surrogateescape")
    if len(b) <= limit:
        return s
    return b[:limit - 3].decode("utf-8", "ignore") + "…"


def size(stats: Mapping[str, Any]) -> tuple[int, int] | None:
    """(segments, blocks at most) from torch's memory-stats counters (nested as
    _cuda_memoryStats returns them, or flat as memory_stats() does): the
    segments, and the blocks torch's memory snapshot will list, at most the active ones,
    the inactive split ones and one whole free block per segment."""
    def current(name: str) -> int | None:
        v = stats.get(name)
        if isinstance(v, Mapping):
            v = v.get("all")
            return int(v["current"]) if isinstance(v, Mapping) and "current" in v else None
        v = stats.get(f"{name}.all.current")
        return None if v is None else int(v)

    seg, act, split = current("segment"), current("active"), current("inactive_split")
    if seg is None or act is None:
        return None
    return seg, act + (split or 0) + seg


def pool_kind(pool: tuple[int, int], mempools: bool) -> str:
    """wire.Pool's kind of torch's pool id (see the module's doc)."""
    a, b = pool
    if a == 0 and b == 0:
        return "default"
    if b == 0:
        return "graph"
    if a == 0 and not mempools:
        return "graph"
    return "private"


def _pool_id(seg: Mapping[str, Any]) -> tuple[int, int]:
    p = seg.get("segment_pool_id")
    if p is None:
        return (0, 0)  # a torch from before pools: all of it is the default pool
    try:
        return int(p[0]), int(p[1])
    except (TypeError, ValueError, IndexError):
        return (-1, -1)  # unreadable: counted as a pool of its own


def summarise(segments: Iterable[Mapping[str, Any]], devs: Sequence[int],
              mempools: bool = True) -> dict[int, dict[str, Any]]:
    """wire.Layout's figures (without t, took_ms, settings) of each device
    of devs from torch's snapshot segments. Free bytes are reserved −
    allocated (what torch's cache holds that no tensor has); the largest
    free block is the largest "inactive" one (a block waiting for another
    stream is neither allocated nor free to take)."""
    # per device: [segments, blocks, reserved, allocated, largest free,
    # expandable, {pool: [segments, reserved, allocated, largest free]}]
    acc: dict[int, list[Any]] = {d: [0, 0, 0, 0, 0, False, {}] for d in devs}
    for seg in segments:
        a = acc.get(seg.get("device", 0))
        if a is None:
            continue
        total = int(seg.get("total_size", 0))
        used = min(int(seg.get("allocated_size", 0)), total)
        blocks = seg.get("blocks") or ()
        largest = 0
        for b in blocks:
            if b["state"] == "inactive":
                s = b["size"]
                if s > largest:
                    largest = s
        largest = min(int(largest), total - used)
        a[0] += 1
        a[1] += len(blocks)
        a[2] += total
        a[3] += used
        if largest > a[4]:
            a[4] = largest
        if seg.get("is_expandable"):
            a[5] = True
        pid = _pool_id(seg)
        p = a[6].get(pid)
        if p is None:
            p = a[6][pid] = [0, 0, 0, 0]
        p[0] += 1
        p[1] += total
        p[2] += used
        if largest > p[3]:
            p[3] = largest
    out = {}
    for d, (nseg, nblk, res, alloc, largest, exp, pools) in acc.items():
        order = sorted(pools.items(), key=lambda kv: (-kv[1][1], kv[0]))
        out[d] = {
            "segments": nseg, "blocks": nblk, "reserved": res, "allocated": alloc,
            "free_in_segments": res - alloc, "largest_free": largest, "expandable": exp,
            "pools": [{"kind": pool_kind(pid, mempools) if pid != (-1, -1) else "private",
                       "id": f"{pid[0]},{pid[1]}"[:MAX_POOL_ID_BYTES], "segments": n,
                       "reserved": r, "allocated": u, "largest_free": lf}
                      for pid, (n, r, u, lf) in order[:MAX_POOLS]],
            "pools_cut": max(0, len(order) - MAX_POOLS),
        }
    return out


# ---- the allocator settings ----

def _text(v: Any) -> str:
    """A setting's value as text, as torch writes it where it can."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, Mapping):
        return ",".join(f"{k}:{_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ",".join(_text(x) for x in v)
    return str(v)


def _settings(source: str, env: str, conf: str, expandable: bool | None,
              items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"from": source}
    if env:
        out["env"] = env
    if conf:
        out["conf"] = clip(conf)
    if expandable is not None:
        out["expandable_segments"] = expandable
    kept = []
    for name, value in items:
        if len(kept) == MAX_SETTINGS:
            break
        name = clip(name)
        if name:
            kept.append({"name": name, "value": clip(value)})
    if kept:
        out["items"] = kept
    return out


def _truth(v: str) -> bool | None:
    return {"true": True, "false": False}.get(v.strip().lower())


def parse_conf(conf: str) -> tuple[bool | None, list[tuple[str, str]]]:
    """(expandable_segments, the other key:value pairs) of an allocator
    settings string as torch writes them ("key:value,key:[a:b,c:d]"); what
    is no pair is kept under its own text with an empty value."""
    parts, depth, cur = [], 0, []
    for ch in conf[:CONF_PARSED]:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (ch == "[") - (ch == "]")
        cur.append(ch)
    parts.append("".join(cur))
    expandable, items = None, []
    for part in parts:
        key, _, value = part.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not key:
            continue
        if key == "expandable_segments" and _truth(value) is not None:
            expandable = _truth(value)
        else:
            items.append((key, value))
    return expandable, items


def set_variable(environ: Mapping[str, str], order: Sequence[str]) -> tuple[str, str]:
    """(name, value) of the first of order set in environ, else ("", "")."""
    for name in order:
        v = environ.get(name)
        if v:
            return name, v
    return "", ""


def from_torch(raw: Mapping[str, Any], environ: Mapping[str, str],
               order: Sequence[str] = ENV_ORDER) -> dict[str, Any]:
    """wire.AllocSettings from torch's own account (a memory snapshot's
    "allocator_settings": each setting by its name, and the string it was
    given)."""
    conf, expandable, items = "", None, []
    for k, v in raw.items():
        name = str(k)
        if name in _CONF_KEYS:
            conf = "" if v is None else str(v)
        elif name == "expandable_segments" and isinstance(v, bool):
            expandable = v
        else:
            items.append((name, _text(v)))
    env, _ = set_variable(environ, order)
    return _settings("torch", env, conf, expandable, items)


def from_text(conf: str, source: str, env: str) -> dict[str, Any]:
    """wire.AllocSettings from a settings string: the one torch took
    (source "torch") or the variable env's value ("env")."""
    expandable, items = parse_conf(conf)
    return _settings(source, env, conf, expandable, items)


class Reader:
    """Reads torch's layout: call() (torch's memory snapshot without
    traces where torch allows: a dict with "segments", or the segments
    alone), summed per device; the settings from its
    "allocator_settings", else settings_text() (the string torch took),
    else the variable of order that is set; each worked out again only
    when what it is made from changed."""

    def __init__(self, call: Callable[[], Any], *, settings_text: Callable[[], str] | None = None,
                 mempools: bool = True, order: Sequence[str] = ENV_ORDER,
                 environ: Mapping[str, str] = os.environ, note: str = "") -> None:
        self.call = call
        self.settings_text = settings_text
        self.mempools = mempools
        self.order = tuple(order)
        self.environ = environ
        self.note = note  # what this torch's reading lacks (status())
        self._made_from: Any = None
        self._settings: dict[str, Any] | None = None

    def read(self, devs: Sequence[int], state: Any = None) -> dict[int, dict[str, Any]]:
        """The layout of each device of devs, from torch's snapshot taken
        now, or from state (a snapshot taken already: a dump's data)."""
        if state is None:
            state = self.call()
        if isinstance(state, Mapping):
            segments, raw = state.get("segments") or (), state.get("allocator_settings")
        else:
            segments, raw = state or (), None
        out = summarise(segments, devs, self.mempools)
        st = self.settings(raw)
        for lay in out.values():
            lay["settings"] = st
            if not lay["segments"] and st.get("expandable_segments"):
                lay["expandable"] = True  # no segment yet: the next one will be
        return out

    def settings(self, raw: Any = None) -> dict[str, Any]:
        """The settings in force: from raw (torch's account), else torch's
        string, else the environment."""
        if isinstance(raw, Mapping) and raw:
            made_from: Any = ("torch", dict(raw))
        elif self.settings_text is not None:
            try:
                made_from = ("text", str(self.settings_text() or ""))
            except Exception:
                made_from = ("env", set_variable(self.environ, self.order))
        else:
            made_from = ("env", set_variable(self.environ, self.order))
        if made_from != self._made_from or self._settings is None:
            kind, what = made_from
            if kind == "torch":
                st = from_torch(what, self.environ, self.order)
            elif kind == "text":
                st = from_text(what, "torch", set_variable(self.environ, self.order)[0])
            else:
                st = from_text(what[1], "env", what[0])
            self._made_from, self._settings = made_from, st
        return self._settings
