"""One holders walk: which device, whether any tensor can exist yet, one
walk at a time with automatic garbage collection off, the walker run, and
its groups ordered (holders by size, then what the allocator holds that no
holder accounts for) and merged past ``top``."""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import threading
import time
from typing import Any

from .. import _backend
from . import _ledger
from ._attribution import UNREACHABLE, _no_tensors
from ._result import HolderGroup, HoldersResult
from ._walker import _Walker

ENV_DEVICE = "GPUTOP_HOLDERS_DEVICE"


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
         time_limit: float | None = None, devs: Any = (), name_rest: bool = True) -> HoldersResult:
    """The walk of device (all of its type's devices when it names no
    index): its groups, held of the walked (or current) device, and the
    ledger of each device of devs and of the walked one."""
    t_ns = time.time_ns()
    dev_type, dev_index = _parse_device(device)
    label = dev_type if dev_index is None else f"{dev_type}:{dev_index}"
    torch = sys.modules.get("torch")
    if torch is None:
        # not imported: no tensor can exist, and importing it costs seconds
        try:
            installed = importlib.util.find_spec("torch") is not None
        except Exception:
            installed = False
        d0 = dev_index or 0
        return HoldersResult([], 0, 0, d0, label, (time.perf_counter() - t0) * 1e3,
                             None if installed else "torch is not installed",
                             held=_no_tensors(d0), ledgers=_no_ledgers({d0, *devs}, t_ns, t0))
    dev = dev_index if dev_index is not None else 0
    if dev_type == "cuda":
        try:
            if not torch.cuda.is_initialized():
                # no CUDA tensor can exist before CUDA is initialised
                return HoldersResult([], 0, 0, dev, label, (time.perf_counter() - t0) * 1e3,
                                     held=_no_tensors(dev), ledgers=_no_ledgers({dev, *devs}, t_ns, t0))
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
        w = _Walker(torch, dev_type, dev_index, max_items, deadline, devs, name_rest)
        try:
            groups = w.run()
            skipped = w.skipped
            held = w.held(dev)
            took = (time.perf_counter() - t0) * 1e3
            ledgers = {}
            for d in sorted({dev, *devs}):
                led = w.ledger(d, t_ns, took, time_limit)
                if led is not None:
                    ledgers[d] = led
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
                         held=held, ledgers=ledgers)


def _no_ledgers(devs: set[int], t: int, t0: float) -> dict[int, dict[str, Any]]:
    """The ledgers of devices on which no tensor can exist (torch not
    imported, CUDA not initialised): whatever is allocated is unattributed."""
    out = {}
    for d in sorted(devs):
        try:
            src = _backend.get()
            c = src.read(d)
            blocks = src.blocks(d)
            figures, notes = _ledger.count(blocks, [], src.workspace_sizes(d), int(c.allocated), int(c.reserved))
        except Exception:
            continue
        out[d] = _ledger.finish(figures, notes, t, (time.perf_counter() - t0) * 1e3)
    return out


_walk_lock = threading.RLock()  # reentrant: a pending call may land inside a walk
