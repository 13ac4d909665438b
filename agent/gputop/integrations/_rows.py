"""What both callbacks report, whatever the framework calls it: the agent
attached when training is set up, labelled rows at its milestones (each
with its ledger), evaluation as a phase, and an end row with its verdict;
step rows (every_n_steps) carry no ledger unless ledger_every_step. Every
rank's process reports for itself (gputop works per process). Never raises
into the training."""

from __future__ import annotations

from typing import Any

from .. import _autorun, _lifecycle, _tracker


class Rows:
    def __init__(self, every_n_steps: int | None = None, rate_hz: float = 100,
                 verdict: bool = True, ledger_every_step: bool = False) -> None:
        if every_n_steps is not None and (not isinstance(every_n_steps, int) or every_n_steps < 1):
            raise ValueError(f"every_n_steps={every_n_steps!r}: want a positive int or None")
        self.every_n_steps = every_n_steps
        self.rate_hz = rate_hz
        self.verdict = verdict
        # a step row's ledger walks the live tensors (up to 200 ms): off by default
        self.ledger_every_step = bool(ledger_every_step)
        self._last_step = -1
        self._phase: str | None = None

    def attach(self) -> None:
        """The agent, and torch's OOM observer from CUDA's initialisation on,
        so that an OOM in the first allocations is still a row."""
        try:
            if _lifecycle.current(auto=False) is None:
                _lifecycle.attach(self.rate_hz)
            _autorun.observe_ooms_from_init()
        except Exception:
            pass

    def snap(self, label: str, end: bool = False, ledger: bool = True) -> None:
        try:
            _tracker.take(label, "snapshot", end=end, verdict=self.verdict, ledger=ledger)
        except Exception:
            pass

    def step(self, global_step: int) -> None:
        n = self.every_n_steps
        if n and global_step != self._last_step and global_step > 0 and global_step % n == 0:
            self._last_step = global_step
            self.snap(f"Step {global_step}", ledger=self.ledger_every_step)

    def phase_start(self, name: str) -> None:
        self._phase = name
        try:
            _tracker.take(name, "phase_start")
        except Exception:
            pass

    def phase_end(self) -> None:
        name, self._phase = self._phase, None
        if name is None:
            return
        try:
            # an evaluation in the middle of training is no end of the run:
            # no holders walk, no verdict
            _tracker.take(name, "phase_end", end=False)
        except Exception:
            pass

    def exception(self, e: BaseException) -> None:
        """A row for an exception during fit: an end row, so its verdict says
        what the failed run left holding memory (the traceback's frames).
        An OOM has its own row with the size asked for and CUDA's free
        memory, from the agent's OOM observer."""
        self.phase_end()
        self.snap(f"Exception ({type(e).__name__})", end=True)


def first_arg(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    return kwargs.get(name, args[0] if args else None)
