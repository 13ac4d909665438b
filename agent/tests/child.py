"""A training process stand-in for the end-to-end tests: the real gputop
package over the fake allocator, driven by commands on stdin, one JSON
answer per command on stdout.

Commands (one per line, words separated by spaces, label = rest of line):
  attach RATE            gputop.attach(rate_hz=RATE)
  alloc DEV BYTES        allocate on the fake GPU
  free DEV BYTES
  snap LABEL             gputop.snapshot(LABEL) -> its values
  tsnap LABEL            Tracker.snapshot(LABEL) -> the row
  phase LABEL            enter and leave gputop.phase(LABEL)
  cleanup                gputop.cleanup() -> released
  oom DEV BYTES          the allocator runs out of memory
  wait_connects N SECS   wait until the agent has connected N times
  wait_samples N SECS    wait until N samples went out
  status                 gputop.status()
  exit                   return from main (atexit says bye)
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gputop  # noqa: E402
from fakegpu import FakeGPU  # noqa: E402


def _wait(cond, secs: float) -> bool:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def main() -> None:
    gpu = FakeGPU(int(os.environ.get("FAKE_NDEV", "1")))
    gpu.install()
    tracker = gputop.Tracker()
    out = sys.stdout

    def say(obj) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        cmd, _, rest = line.rstrip("\n").partition(" ")
        a = rest.split()
        if cmd == "attach":
            h = gputop.attach(rate_hz=float(a[0]) if a else 100)
            say({"ok": True, "repr": repr(h)})
        elif cmd == "alloc":
            gpu.alloc(int(a[0]), int(a[1]))
            say({"ok": True})
        elif cmd == "free":
            gpu.free(int(a[0]), int(a[1]))
            say({"ok": True})
        elif cmd == "snap":
            say({"label": rest, "values": {str(k): v for k, v in gputop.snapshot(rest).items()}})
        elif cmd == "tsnap":
            old = sys.stdout
            sys.stdout = sys.stderr  # keep the printed line off the answer channel
            try:
                row = tracker.snapshot(rest)
            finally:
                sys.stdout = old
            say({"label": rest, "row": row})
        elif cmd == "phase":
            with gputop.phase(rest):
                gpu.alloc(0, 1 << 20)
            say({"ok": True})
        elif cmd == "cleanup":
            old = sys.stdout
            sys.stdout = sys.stderr
            try:
                r = gputop.cleanup()
            finally:
                sys.stdout = old
            say({"released": r["released_allocated_bytes"],
                 "before": {str(k): v for k, v in r["before"].items()},
                 "after": {str(k): v for k, v in r["after"].items()}})
        elif cmd == "oom":
            gpu.oom(int(a[0]), int(a[1]))
            say({"ok": True})
        elif cmd == "wait_connects":
            ok = _wait(lambda: gputop.status().get("connects", 0) >= int(a[0])
                       and gputop.status().get("connected"), float(a[1]))
            say({"ok": ok, "status": gputop.status()})
        elif cmd == "wait_samples":
            ok = _wait(lambda: gputop.status().get("samples_sent", 0) >= int(a[0]), float(a[1]))
            say({"ok": ok, "status": gputop.status()})
        elif cmd == "status":
            say(gputop.status())
        elif cmd == "exit":
            say({"ok": True})
            return
        else:
            say({"error": f"unknown command {cmd!r}"})


if __name__ == "__main__":
    main()
