#!/usr/bin/env python3
"""gputop.cleanup() in a JAX or a CuPy program, for frameworks_check.py:
what cleanup() says it released and left, against the framework's own
figures read in the program right before and right after it.

    python3 bench/workloads/fw_cleanup.py [--framework jax|cupy]   (default jax)
    python3 bench/workloads/fw_cleanup.py [--framework jax|cupy] --dry-run   (no GPU: the fakes of agent/tests)

JAX: an array the program keeps (params), one only a reference cycle
keeps (gc frees it), a jitted function run once; CuPy: arrays made and
freed (the pool keeps their blocks). Prints one line
`CLEANUP {"result": cleanup()'s "frameworks", "before", "after": the
framework's own figures, "live": [count, bytes] of jax.live_arrays() on
device 0 after, "printed": what cleanup() printed}`."""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", choices=("jax", "cupy"), default="jax")
    ap.add_argument("--dry-run", action="store_true", help="the fake jax / cupy of agent/tests")
    a = ap.parse_args()
    if a.dry_run:
        sys.path.insert(0, os.path.join(ROOT, "agent", "tests", "fakemodules"))
        sys.path.insert(0, os.path.join(ROOT, "agent", "tests"))
    gc.disable()  # the cycle below waits for cleanup()'s gc.collect()
    if a.framework == "jax":
        import jax

        dev = jax.local_devices()[0]

        def own() -> dict:
            return {k: v for k, v in (dev.memory_stats() or {}).items() if isinstance(v, int)}

        if a.dry_run:
            params = jax.fake.array(0, (1024, 1024))
            cyc: list = [jax.fake.array(0, (2048, 1024), weak=True)]
            jax.fake.compile(0, 1 << 20)
        else:
            import jax.numpy as jnp

            params = jnp.ones((1024, 1024), jnp.float32)
            cyc = [jnp.ones((2048, 1024), jnp.float32)]
            jax.jit(lambda x: (x * 2).sum())(params).block_until_ready()
        cyc.append(cyc)
        del cyc
    else:
        import cupy as cp

        pool = cp.get_default_memory_pool()

        def own() -> dict:
            return {"used_bytes": pool.used_bytes(), "total_bytes": pool.total_bytes(), "free_bytes": pool.free_bytes()}

        held = []
        for n in (100 * MiB, 300 * MiB + 4096):
            if a.dry_run:
                cp.fake.alloc(n)
            else:
                held.append(cp.ones((n // 4,), dtype=cp.float32))
        keep = cp.fake.alloc(64 * MiB) if a.dry_run else cp.ones((16 * MiB,), dtype=cp.float32)
        if a.dry_run:
            cp.fake.free(100 * MiB)
            cp.fake.free(300 * MiB + 4096)
        held.clear()  # their blocks are free in the pool
        if not a.dry_run:
            cp.cuda.Device(0).synchronize()
    import gputop

    gputop.attach()
    before = own()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        got = gputop.cleanup()
    after = own()
    live = [0, 0]
    if a.framework == "jax":
        for x in jax.live_arrays():
            if 0 in [getattr(d, "local_hardware_id", None) for d in x.devices()]:
                live[0] += 1
                live[1] += int(x.nbytes)
        assert params is not None  # kept to the end: cleanup() must not drop it
    else:
        assert keep is not None or a.dry_run
    print("CLEANUP " + json.dumps({"result": got.get("frameworks", []), "before": before, "after": after,
                                   "live": live, "printed": buf.getvalue()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
