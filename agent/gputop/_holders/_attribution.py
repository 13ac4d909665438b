"""The attribution of a device's allocated bytes (wire.Held, what an end
row carries): each live block of the caching allocator counted once, as
Python's (it holds a storage the walk saw), as internal (a cuBLAS/cuBLASLt
workspace: a block of the size torch gives them that no storage owns) or
as unaccounted; and the two groups that list what no holder accounts for.
"""

from __future__ import annotations

import bisect
from typing import Any

from .. import _backend
from . import _ledger
from ._result import HolderGroup

UNREACHABLE = "not reachable from Python"  # the CUDA remainder: listed last, it is no holder
CUDA_BLOCK = 512  # the caching allocator rounds every block up to this
WORKSPACES = "cuBLAS workspaces"  # the torch_internal group


class _Attribution:
    """Methods of the walker (_walker._Walker) that attribute the devices'
    blocks once the walk has seen every storage it will see."""

    def remainder(self, torch: Any) -> list[HolderGroup]:
        """What the allocator holds beyond the storages seen: torch's
        cuBLAS/cuBLASLt workspaces, and what nothing accounts for. Each
        live block of a device's allocator is counted once, as owned by a
        storage the walk saw (Python's share), as a workspace (a block of
        the size torch gives them that no storage owns), or as neither;
        the three shares are kept per device for held()."""
        src = _backend.get()
        if self.dev_type not in src.tensor_device_types:
            return []  # a walk of tensors whose memory is not this allocator's (torch's is CUDA's)
        try:
            if self.dev_index is not None:
                devs = {self.dev_index}
            elif self.cuda:  # only devices this process uses: asking others could wake them
                devs = {k[0] for k in self.sizes} | {torch.cuda.current_device()}
            else:
                devs = {k[0] for k in self.sizes} | {0}
        except Exception:
            return []
        devs |= self.want
        internal = unaccounted = workspaces = 0
        for d in sorted(devs):
            try:
                blocks, sizes = self.read_blocks.pop(d, None) or (src.blocks(d), src.workspace_sizes(d))
                part = _partition(src, d, sorted(ptr for (i, ptr) in self.sizes if i == d),
                                  sum(n for (i, _), n in self.sizes.items() if i == d), blocks, sizes)
            except Exception:
                continue
            self.partition[d] = part
            try:
                # the same blocks, so the ledger's parts and held's add up alike
                reserved = int(src.read(d).reserved)
                self.ledgers[d] = _ledger.count(blocks, _ledger.storages_of(self, d), sizes,
                                                int(part["allocated"]), reserved)
            except Exception:
                pass
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

    def ledger(self, dev: int, t: int, took_ms: float, limit: float | None) -> dict[str, Any] | None:
        """Device dev's ledger (wire.Ledger), or why there is none; None when
        its allocator was not read."""
        if self.cut:
            bound = _ledger.bound_text(limit or 0.0)
            return _ledger.zero(t, f"the walk took longer than its {bound} bound and was stopped after "
                                   f"{self.visits:,} objects (snapshot(label, ledger=False) skips it)", took_ms)
        got = self.ledgers.get(dev)
        if got is None:
            return None
        figures, notes = got
        return _ledger.finish(figures, _ledger.walk_notes(self, dev) + notes, t, took_ms)

    def explained(self) -> bool:
        """Every live block of the devices asked for holds a storage the
        walk has seen or is a workspace: a pass over the tensors no root
        reached could add nothing to their ledgers. The blocks read are
        kept for remainder()."""
        src = _backend.get()
        if not self.want or self.dev_type not in src.tensor_device_types:
            return False
        for d in sorted(self.want):
            try:
                blocks = src.blocks(d)
                sizes = src.workspace_sizes(d)
            except Exception:
                return False
            if blocks is None:
                return False
            self.read_blocks[d] = (blocks, sizes)
            ptrs = sorted(ptr for (i, ptr) in self.sizes if i == d)
            for addr, size, asked in blocks:
                i = bisect.bisect_left(ptrs, addr)
                if not (i < len(ptrs) and ptrs[i] < addr + size) and asked not in sizes:
                    return False
        return True

    def held(self, dev: int) -> dict[str, Any] | None:
        """The attribution of device dev (wire.Held without t / took_ms /
        top), or why there is none; None when its allocator was not read."""
        if self.cut:
            return {"skipped": self.cut}
        part = self.partition.get(dev)
        return dict(part) if part is not None else None


_UNREAD: Any = object()  # _partition's blocks not read yet


def _partition(src: _backend.Backend, dev: int, ptrs: list[int], seen_bytes: int,
               blocks: Any = _UNREAD, sizes: set[int] | None = None) -> dict[str, Any]:
    """Device dev's allocated bytes split by owner: python (blocks that hold
    a storage at one of ptrs, sorted), internal (cuBLAS/cuBLASLt workspaces)
    and unaccounted. Without the allocator's blocks, Python's share is the
    storages' bytes and the rest of the allocated counter is unaccounted.
    blocks and sizes: as src gives them, when read already."""
    if blocks is _UNREAD:
        blocks = src.blocks(dev)
    if blocks is None:
        alloc = int(src.read(dev).allocated)
        py = min(seen_bytes, alloc)
        return {"allocated": alloc, "python": py, "internal": 0, "unaccounted": alloc - py}
    if sizes is None:
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
        return _partition(_backend.get(), dev, [], 0)
    except Exception:
        return None
