"""gputop's rows from the Hugging Face Trainer's hooks::

    from gputop.integrations.transformers import GputopCallback
    trainer = Trainer(..., callbacks=[GputopCallback()])     # every_n_steps=100 for more rows

Rows: "Training start", "Epoch N" at each epoch's end ("Step N" every
every_n_steps optimizer steps when asked), "Evaluation (start)" /
"Evaluation (end)" as a phase, "Training end", and, once train() has
returned, "After training": an end row with its verdict. An exception in
train() leaves an "Exception (TYPE)" end row, after the OOM row when it
was an OOM. The Trainer has no hook before an evaluation, after train()
or for an exception, so the callback wraps that Trainer's train() and
evaluate() (the instance's, nothing else) when it is given at
construction (``callbacks=[...]``); added later with add_callback, it
reports the evaluation when it ends and no "After training" row. This
module imports transformers only when GputopCallback is used.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from ._rows import Rows

_cls: type | None = None


def _build() -> type:
    try:
        from transformers import Trainer, TrainerCallback
    except ImportError as e:
        raise ImportError("gputop.integrations.transformers needs transformers: pip install transformers") from e

    def find_trainer() -> Any:
        # the Trainer whose callback handler is calling us, a few frames up
        f = sys._getframe(2)
        for _ in range(8):
            if f is None:
                return None
            t = f.f_locals.get("self")
            if isinstance(t, Trainer):
                return t
            f = f.f_back
        return None

    class GputopCallback(TrainerCallback):
        """Reports this process's GPU memory to gputop at the Trainer's
        milestones. every_n_steps: also a row every N optimizer steps
        (ledger_every_step=True: with its ledger, a walk of the live
        tensors of up to 200 ms each); rate_hz: the agent's sampling rate;
        verdict=False: no holders walk for the end rows."""

        def __init__(self, every_n_steps: int | None = None, rate_hz: float = 100,
                     verdict: bool = True, ledger_every_step: bool = False) -> None:
            self._rows = Rows(every_n_steps, rate_hz, verdict, ledger_every_step)
            self._wrapped: Any = None

        def _wrap(self, trainer: Any) -> None:
            if trainer is None or self._wrapped is trainer:
                return
            self._wrapped = trainer
            rows = self._rows
            train, evaluate = trainer.train, trainer.evaluate

            @functools.wraps(train)
            def wrapped_train(*a: Any, **kw: Any) -> Any:
                try:
                    out = train(*a, **kw)
                except BaseException as e:
                    rows.exception(e)
                    raise
                rows.snap("After training", end=True)
                return out

            @functools.wraps(evaluate)
            def wrapped_evaluate(*a: Any, **kw: Any) -> Any:
                rows.phase_start("Evaluation")
                try:
                    return evaluate(*a, **kw)
                finally:
                    rows.phase_end()

            trainer.train, trainer.evaluate = wrapped_train, wrapped_evaluate

        def on_init_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._rows.attach()
            try:
                self._wrap(find_trainer())
            except Exception:
                pass

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._rows.attach()
            self._rows.snap("Training start")

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self._rows.every_n_steps:
                self._rows.step(int(state.global_step))

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            epoch = state.epoch if state.epoch is not None else 0
            self._rows.snap(f"Epoch {int(round(epoch))}")

        def on_evaluate(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self._rows._phase is None:  # not through the wrapped evaluate()
                self._rows.snap("Evaluation")

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._rows.snap("Training end", end=False)

    GputopCallback.__module__ = __name__
    GputopCallback.__qualname__ = "GputopCallback"
    return GputopCallback


def __getattr__(name: str) -> Any:
    global _cls
    if name == "GputopCallback":
        if _cls is None:
            _cls = _build()
        return _cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
