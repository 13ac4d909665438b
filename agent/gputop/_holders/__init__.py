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

The package, a module per concern (each says why in its docstring):

- this module: holders(), holders_report(), held_at(), holds_device_tensors();
- _result: HoldersResult and HolderGroup, what holders() returns, and its table;
- _main_thread: running the agent thread's walk on the main thread;
- _walk: one walk: the device, the lock, the walker run, groups ordered;
- _walker: the walker: containers, attributes, storages, autograd graphs;
- _group: a holder while the walk runs (the walker's groups, the hints' input);
- _owners: modules, optimizers, exceptions and frames as owners;
- _roots: where a walk starts, in order, and the referrer guess for the rest;
- _classify: what the walk recognises (type classes, machinery, owner kinds);
- _attribution: a device's allocated bytes split by owner (``held``);
- _hints: the one-line fix of each group;
- _format: byte counts and example shapes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence

from . import _ledger
from ._attribution import CUDA_BLOCK, UNREACHABLE, WORKSPACES
from ._format import format_bytes
from ._ledger import LEDGER_LIMIT_S
from ._main_thread import _on_main_thread
from ._result import HolderGroup, HoldersResult, format_table
from ._roots import REFERRER_MIN_BYTES, REFERRER_TENSORS, SECOND_PASS_MS
from ._walk import ENV_DEVICE, _default_device, _parse_device, _run
from ._walker import MAX_DEPTH, MAX_ITEMS, MAX_VISITS, PREFILTER_FRONTIER, PREFILTER_ITEMS, _Walker

__all__ = [
    "CUDA_BLOCK", "ENV_DEVICE", "MAX_DEPTH", "MAX_ITEMS", "MAX_VISITS", "PREFILTER_FRONTIER",
    "PREFILTER_ITEMS", "REFERRER_MIN_BYTES", "REFERRER_TENSORS", "SECOND_PASS_MS", "UNREACHABLE",
    "WALK_LIMIT_S", "WORKSPACES", "HolderGroup", "HoldersResult", "LEDGER_LIMIT_S", "format_bytes", "format_table",
    "held_at", "holders", "holders_report", "holds_device_tensors", "ledger_of", "on_device", "report_of",
    "row_walk",
]

# Here, not beside the walk: held_at() reads it at each call, so that
# setting gputop._holders.WALK_LIMIT_S takes effect.
WALK_LIMIT_S = 2.0  # an end row's walk runs in the caller's thread: it stops here


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
    res = _walked(device, top, collect, max_items, time_limit)
    if print_table:
        try:
            print(res.table())
        except Exception:
            pass
    return res


def _walked(device: Any, top: int | None = None, collect: bool = False, max_items: int = MAX_ITEMS,
            time_limit: float | None = None, devs: Sequence[int] = (), name_rest: bool = True) -> HoldersResult:
    """holders() without printing, with the ledgers of devs too (name_rest:
    guess who holds the tensors no root reaches). Never raises."""
    t0 = time.perf_counter()
    t_ns = time.time_ns()
    try:
        res = _run(device, top, collect, max_items, t0, time_limit, devs, name_rest)
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
        # looked up here at each call, not bound where the walk runs: a
        # holders put in this module's place is the one that walks
        return report_of(_on_main_thread(holders, device, timeout))
    except Exception as e:
        return {"dev": 0, "total": 0, "skipped": 1, "took_ms": 0.0,
                "groups": [{"kind": "other", "name": "holders walk failed", "bytes": 0,
                            "tensors": 0, "hint": f"{type(e).__name__}: {e}"}]}


def report_of(res: HoldersResult) -> dict[str, Any]:
    """A holders() result as the agent sends it (wire.Holders without type,
    t, id): a failed walk as a group that says why, the attribution as held."""
    d = res.as_dict()
    if res.error:
        d["groups"].append({"kind": "other", "name": "holders walk failed",
                            "bytes": 0, "tensors": 0, "hint": res.error})
    if res.held is not None:
        d["held"] = res.held
    d["ledger"] = ledger_of(res, res.dev)
    return d


def ledger_of(res: HoldersResult, dev: int) -> dict[str, Any]:
    """The ledger a walk found for device dev (wire.Ledger), or one that
    says why there is none."""
    got = (res.ledgers or {}).get(dev)
    if got is not None:
        return got
    why = (res.held or {}).get("skipped") or res.error or "this device's allocator could not be read"
    return _ledger.zero((res.held or {}).get("t") or time.time_ns(), f"no ledger: {why}", res.took_ms)


def row_walk(devs: Sequence[int], held: bool, ledger: bool) -> dict[int, dict[str, Any]]:
    """What a row taken in the caller's thread wants of one walk: for each
    device of devs, "held" (an end row's attribution, when held) and
    "ledger" (what the allocated bytes are made of, when ledger). Bounded:
    WALK_LIMIT_S with held (the verdict's walk, as before), else
    LEDGER_LIMIT_S; past it each says so. Never raises."""
    devs = [int(d) for d in devs]
    if not devs or not (held or ledger):
        return {}
    # a verdict on several devices: a walk each, as held's top holders are
    # those of one device; else one walk for all of them
    walks = [[d] for d in devs] if held and len(devs) > 1 else [devs]
    limit = WALK_LIMIT_S if held else LEDGER_LIMIT_S
    out: dict[int, dict[str, Any]] = {}
    for ds in walks:
        try:
            device = on_device(ds[0]) if len(ds) == 1 else _default_device()
            res = _walked(device, time_limit=limit, devs=ds, name_rest=held)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            res = HoldersResult([], 0, 1, ds[0], "", 0.0, f"{type(e).__name__}: {e}")
        for d in ds:
            got = out.setdefault(d, {})
            if held:
                got["held"] = res.held or {
                    "t": time.time_ns(), "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                    "skipped": f"the holders walk failed: {res.error or 'no attribution'}"}
            if ledger:
                got["ledger"] = ledger_of(res, d)
    return out


def held_at(dev: int, limit: float | None = None) -> dict[str, Any]:
    """The attribution of an end row on torch device dev (wire.Held): a
    holders walk of that device in the caller's thread, stopped after limit
    seconds (default WALK_LIMIT_S). Never raises."""
    t = time.time_ns()
    if limit is None:
        limit = WALK_LIMIT_S
    try:
        return holders(device=on_device(dev), time_limit=limit).held or {"t": t, "skipped": "no attribution"}
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return {"t": t, "allocated": 0, "python": 0, "internal": 0, "unaccounted": 0,
                "skipped": f"the holders walk failed: {type(e).__name__}: {e}"}


def on_device(dev: int) -> str:
    """Device index dev of the device type walked by default: "cuda:1"
    ("cpu:1" under GPUTOP_HOLDERS_DEVICE=cpu)."""
    return f"{_parse_device(None)[0]}:{int(dev)}"


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
