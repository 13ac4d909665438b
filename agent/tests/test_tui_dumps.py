"""Memory dumps in the real terminal: the process pane says the agent
records history, M asks the selected process for a dump over the real
socket, its row appears, and I shows the dump read back by gputop."""

from __future__ import annotations

import textwrap
from pathlib import Path

from test_tui import gputop_with

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import gputop
    from fakegpu import FakeGPU

    gpu = FakeGPU(1)
    gpu.install()
    gputop.attach(rate_hz=50, history=5000)
    def grow(n):
        out = []
        for _ in range(n):
            out.append(gpu.block(0, 6 * {mib}))  # GROW
        return out
    kept = grow(7)
    gputop.snapshot("Epoch 1")
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
    """
)


def test_dump_key_and_pane(gputop_bin: str, tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    with gputop_with(gputop_bin, tmp_path, CHILD, GPUTOP_DUMP_DIR=str(dumps)) as (term, child):
        term.wait_for("history 5000")
        term.wait_for("Epoch 1")
        term.keys("I")  # no row names a dump yet
        term.wait_for("no row of this GPU names a memory dump")
        term.keys("M")
        scr = term.wait_for("memory dump at")
        files = list(dumps.iterdir())
        assert len(files) == 1 and files[0].name.endswith(".pickle"), files
        term.keys("I")
        scr = term.wait_for("live blocks by allocating frame")
        line = next(i for i, x in enumerate(CHILD.splitlines(), 1) if "# GROW" in x)
        assert "MEMORY DUMP" in scr
        row = next(x for x in scr.splitlines() if f"<string>:{line} grow" in x)
        assert " 7  " in row and "42.0 MiB" in row, row
