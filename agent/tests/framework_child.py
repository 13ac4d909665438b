"""A JAX, CuPy or torch-and-CuPy program stand-in for the end-to-end
tests: the real gputop package over fake JAX and CuPy modules (and the
fake GPU for torch), driven by commands on stdin, one JSON answer per
command on stdout.

FAKE_FW: "jax", "cupy" or "torch+cupy". Commands:
  attach                 gputop.attach()
  jinit                  JAX creates its backend (its first device use)
  jarray NAME N M        a float32[N, M] array on device 0, held by __main__'s NAME
  jdel NAME              del NAME
  calloc BYTES / cfree BYTES   CuPy's pool on device 0
  jcycle NAME N M        a float32[N, M] array that only a reference cycle keeps (gc off until cleanup)
  jcompile BYTES         a compiled computation keeping BYTES on device 0 until jax.clear_caches()
  talloc BYTES           torch allocates on device 0 (torch+cupy)
  cleanup                gputop.cleanup() -> what it returned and printed, the frameworks' figures then
  snap LABEL             gputop.snapshot(LABEL) -> its values
  stats                  the frameworks' own figures now
  wait_connects N SECS
  inits                  the backend creations the agent caused (none)
  jax_oom BYTES / jax_oom_text TEXT / cupy_oom BYTES   the program ends with that OOM (TEXT: \\n a newline)
  exit
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gputop  # noqa: E402
from fakeframeworks import FakeCuPy, FakeJax  # noqa: E402

FW = os.environ.get("FAKE_FW", "jax")
jax = FakeJax(int(os.environ.get("FAKE_NDEV", "1"))).install() if "jax" in FW else None
cupy = FakeCuPy().install() if "cupy" in FW else None
gpu = None
if "torch" in FW:
    from fakegpu import FakeGPU

    gpu = FakeGPU(1)
    gpu.install()


def _wait(cond, secs: float) -> bool:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def stats() -> dict:
    out = {}
    if jax is not None:
        out["jax"] = jax.devs[0].memory_stats()
    if cupy is not None:
        p = cupy.pools.get(0)
        out["cupy"] = {"used_bytes": p.used, "total_bytes": p.total} if p else {}
    return out


def main() -> None:
    def say(obj) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        cmd, _, rest = line.rstrip("\n").partition(" ")
        a = rest.split()
        if cmd == "attach":
            say({"ok": True, "repr": repr(gputop.attach())})
        elif cmd == "jinit":
            jax.backend_init()
            say({"ok": True})
        elif cmd == "jarray":
            globals()[a[0]] = jax.array(0, (int(a[1]), int(a[2])))
            say({"ok": True})
        elif cmd == "jdel":
            jax.delete(globals().pop(a[0]))
            say({"ok": True})
        elif cmd == "jcycle":
            import gc
            gc.disable()  # the cycle waits for cleanup()'s gc.collect()
            holder: dict = {}
            holder["self"] = holder
            holder[a[0]] = jax.array(0, (int(a[1]), int(a[2])), weak=True)
            del holder
            say({"ok": True})
        elif cmd == "jcompile":
            jax.compile(0, int(a[0]))
            say({"ok": True})
        elif cmd == "cleanup":
            import contextlib
            import io
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                got = gputop.cleanup()
            live = len(jax.live_arrays()) if jax is not None else 0
            say({"result": got, "printed": buf.getvalue(), "stats": stats(), "live_arrays": live,
                 "cleared": jax.cleared if jax is not None else 0,
                 "pinned_freed": cupy.pinned_api.freed if cupy is not None else 0})
        elif cmd == "calloc":
            cupy.alloc(int(a[0]))
            say({"ok": True})
        elif cmd == "cfree":
            cupy.free(int(a[0]))
            say({"ok": True})
        elif cmd == "talloc":
            gpu.alloc(0, int(a[0]))
            say({"ok": True})
        elif cmd == "snap":
            v = gputop.snapshot(rest)
            say({"values": {str(k): x for k, x in v.items()}, "stats": stats()})
        elif cmd == "stats":
            say(stats())
        elif cmd == "wait_connects":
            ok = _wait(lambda: gputop.status().get("connects", 0) >= int(a[0]), float(a[1]))
            say({"ok": ok, "status": {k: v for k, v in gputop.status().items() if k in ("connects", "last_error", "frameworks")}})
        elif cmd == "wait_devices":
            ok = _wait(lambda: bool(gputop.status().get("frameworks")), float(a[0]))
            say({"ok": ok})
        elif cmd == "inits":
            say({"inits": jax.inits if jax is not None else 0})
        elif cmd == "jax_oom":  # uncaught: the program ends with it
            say({"ok": True})
            from fakeframeworks import XlaRuntimeError
            raise XlaRuntimeError(f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {a[0]} bytes.")
        elif cmd == "jax_oom_text":  # XLA's message as given
            say({"ok": True})
            from fakeframeworks import XlaRuntimeError
            raise XlaRuntimeError(rest.replace("\\n", "\n"))
        elif cmd == "cupy_oom":
            say({"ok": True})
            from fakeframeworks import CuPyOutOfMemoryError
            raise CuPyOutOfMemoryError(f"Out of memory allocating {int(a[0]):,} bytes (allocated so far: 10,000,384 bytes).")
        elif cmd == "exit":
            say({"ok": True})
            return
        else:
            say({"error": f"unknown command {cmd!r}"})


if __name__ == "__main__":
    main()
