"""The ledger (wire.Ledger): what one device's allocated bytes are made of
at a row, counted from the same walk as the holders.

Each storage the walk reaches gets the first part that claims it, in this
order: params (parameters and buffers of the nn.Modules the walk reaches,
any other live nn.Parameter, and the tensors an optimizer steps), grads
(their .grad), optimizer (an optimizer's state), activations (tensors that
autograd graphs saved for backward), other tensors (every other tensor on
the device). Then each live block of the caching allocator is counted
once, in the first part of the storages inside it, for the bytes those
storages cover (a tensor's numel x element size, shared storages and views
once); a block no storage owns is a cuBLAS/cuBLASLt workspace when it has
their size, else nobody's. What the parts leave of the allocated bytes
(the allocator's rounding, blocks nothing reachable owns) is gputop's
"unattributed": never sent, worked out on the other side.

What the walk could not count is said in a few words each (``uncounted``):
objects it skipped, tensors freed during it, tensors with no memory of
their own (meta, FakeTensor), a torch that does not show saved tensors.
"""

from __future__ import annotations

import bisect
from typing import Any, Iterable, Sequence

from ._format import format_bytes

# parts, in the order they claim a storage (lower wins)
PARAMS, GRADS, OPTIMIZER, ACTIVATIONS, OTHER = range(5)
PARTS = ("params", "grads", "optimizer", "activations", "other_tensors")

# the walk for a row that only wants a ledger stops here (an end row's walk
# also attributes the verdict: it keeps the holders walk's own limit)
LEDGER_LIMIT_S = 0.2
MAX_UNCOUNTED = 8  # wire.MaxUncounted
MAX_TEXT = 256  # wire.MaxSettingBytes: the longest entry, and skipped


def zero(t: int, skipped: str = "", took_ms: float = 0.0) -> dict[str, Any]:
    """A ledger with no figures: skipped says why (figures zero then)."""
    d: dict[str, Any] = {"t": t, "allocated": 0, "reserved": 0, **dict.fromkeys(PARTS, 0), "workspace": 0}
    if skipped:
        d["skipped"] = clip(skipped)
    if took_ms:
        d["took_ms"] = round(took_ms, 3)
    return d


def clip(s: str) -> str:
    """s within MAX_TEXT bytes of UTF-8."""
    b = s.encode("utf-8", "replace")
    if len(b) <= MAX_TEXT:
        return s
    return b[: MAX_TEXT - 3].decode("utf-8", "ignore") + "..."


def bound_text(limit_s: float) -> str:
    return f"{limit_s * 1e3:.0f} ms" if limit_s < 1 else f"{limit_s:.1f} s"


def count(blocks: Sequence[tuple[int, int, int]] | None, storages: Iterable[tuple[int, int, int]],
          workspace_sizes: set[int], allocated: int, reserved: int) -> tuple[dict[str, Any], list[str]]:
    """The figures of one device's ledger (no t, took_ms) and what they
    could not count.

    blocks: the allocator's live blocks (address, size, size asked for),
    sorted, or None when they cannot be read; storages: (address, bytes,
    part) of each storage the walk saw on the device; allocated, reserved:
    torch's counters, read right after the blocks.
    """
    parts = [0] * len(PARTS)
    workspace = 0
    notes: list[str] = []
    st = sorted(storages)
    if blocks is None:
        # no blocks: each storage counted for its bytes, in its part, as
        # far as the allocated counter goes
        for _, n, p in st:
            parts[p] += n
        left = allocated
        for i, n in enumerate(parts):
            parts[i] = min(n, left)
            left -= parts[i]
        if allocated:
            notes.append("torch's live blocks could not be read: the parts are the tensors' storages, "
                         "workspaces not told apart")
    else:
        ptrs = [s[0] for s in st]
        allocated = 0
        outside = outside_bytes = 0
        i = 0
        for addr, size, asked in blocks:
            allocated += size
            j = bisect.bisect_left(ptrs, addr, i)
            outside += j - i
            outside_bytes += sum(s[1] for s in st[i:j])
            best, extent = len(PARTS), 0
            i = j
            end = addr + size
            while i < len(st) and st[i][0] < end:
                ptr, n, p = st[i]
                best = min(best, p)
                extent = max(extent, ptr + n - addr)
                i += 1
            if best < len(PARTS):
                parts[best] += min(size, extent)
            elif asked in workspace_sizes:
                workspace += size
        outside += len(st) - i
        outside_bytes += sum(s[1] for s in st[i:])
        if outside:
            notes.append(f"{outside} tensor{'s' if outside != 1 else ''} ({format_bytes(outside_bytes)}) in no live "
                         "block of torch's allocator: freed during the walk, or memory torch did not allocate")
    out: dict[str, Any] = {"allocated": int(allocated), "reserved": int(max(reserved, allocated))}
    out.update(zip(PARTS, (int(n) for n in parts)))
    out["workspace"] = int(workspace)
    return out, notes


def storages_of(walker: Any, dev: int) -> list[tuple[int, int, int]]:
    """(address, bytes, part) of each storage a walker saw on device dev."""
    parts = walker.parts
    nbytes = walker.nbytes
    return [(key[1], nbytes.get(key, 0), parts.get(key, OTHER)) for key in walker.sizes if key[0] == dev]


def walk_notes(walker: Any, dev: int) -> list[str]:
    """What the walk itself could not count, device dev's share."""
    notes = []
    if walker.skipped:
        notes.append(f"{walker.skipped} object{'s' if walker.skipped != 1 else ''} skipped (attributes that raised, "
                     "freed during the walk, containers past their first items): their tensors, if any, "
                     "counted as other tensors")
    if walker.over_visits:
        notes.append("the walk stopped following references after its object limit: modules and "
                     "optimizers past it counted as other tensors")
    empty = dict(walker.no_memory.get(dev, {}))
    for k, n in walker.no_memory.get(-1, {}).items():  # meta tensors: on no device
        empty[k] = empty.get(k, 0) + n
    if empty:
        kinds = ", ".join(sorted(empty)[:3])
        n = sum(empty.values())
        notes.append(f"{n} tensor{'s' if n != 1 else ''} on the device with no memory of their own "
                     f"(meta or fake: {kinds}): nothing to count")
    if not walker.raw_saved:
        notes.append("this torch does not show the tensors autograd saved without unpacking them: "
                     "activations counted as other tensors or unattributed")
    return notes


def finish(figures: dict[str, Any], notes: list[str], t: int, took_ms: float) -> dict[str, Any]:
    """The wire.Ledger of a device: t, the figures, the notes bounded."""
    d = {"t": t, **figures}
    if notes:
        kept = [clip(n) for n in notes[:MAX_UNCOUNTED]]
        if len(notes) > MAX_UNCOUNTED:
            kept[-1] = clip(f"and {len(notes) - MAX_UNCOUNTED + 1} more things the walk could not count")
        d["uncounted"] = kept
    d["took_ms"] = round(took_ms, 3)
    return d
