"""gputop's rows from Lightning's hooks (Lightning 2.x)::

    from gputop.integrations.lightning import GputopCallback
    trainer = Trainer(callbacks=[GputopCallback()])          # every_n_steps=100 for more rows

Rows: "Training start", "Epoch N" at each training epoch's end ("Step N"
every every_n_steps optimizer steps when asked), "Validation (start)" /
"Validation (end)" ("Sanity check" before training) as a phase, "Training
end", and "After teardown", an end row with its verdict, once Lightning
has torn the run down (model and optimizer moved off the GPU). An
exception during fit leaves an "Exception (TYPE)" end row, after the OOM
row when it was an OOM. The callback subclasses the Callback of whichever
of ``lightning`` and ``pytorch_lightning`` are installed (both when both
are, so either Trainer takes it); this module imports neither until
GputopCallback is used.
"""

from __future__ import annotations

from typing import Any

from ._rows import Rows

_cls: type | None = None


def _bases() -> tuple[type, ...]:
    bases = []
    try:
        from lightning.pytorch.callbacks import Callback as L
        bases.append(L)
    except ImportError:
        pass
    try:
        from pytorch_lightning.callbacks import Callback as PL
        if PL not in bases:
            bases.append(PL)
    except ImportError:
        pass
    if not bases:
        raise ImportError("gputop.integrations.lightning needs Lightning 2.x: pip install lightning "
                          "(or pytorch_lightning)")
    return tuple(bases)


def _build() -> type:
    class GputopCallback(*_bases()):  # type: ignore[misc]
        """Reports this process's GPU memory to gputop at Lightning's
        milestones. every_n_steps: also a row every N optimizer steps
        (ledger_every_step=True: with its ledger, a walk of the live
        tensors of up to 200 ms each); rate_hz: the agent's sampling rate;
        verdict=False: no holders walk for the end rows."""

        def __init__(self, every_n_steps: int | None = None, rate_hz: float = 100,
                     verdict: bool = True, ledger_every_step: bool = False) -> None:
            super().__init__()
            self._rows = Rows(every_n_steps, rate_hz, verdict, ledger_every_step)

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            self._rows.attach()

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            self._rows.snap("Training start")

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            if self._rows.every_n_steps:
                self._rows.step(int(trainer.global_step))

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            self._rows.snap(f"Epoch {int(trainer.current_epoch) + 1}")

        def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
            self._rows.phase_start("Sanity check" if getattr(trainer, "sanity_checking", False)
                                   else "Validation")

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            self._rows.phase_end()

        def on_test_start(self, trainer: Any, pl_module: Any) -> None:
            self._rows.phase_start("Test")

        def on_test_end(self, trainer: Any, pl_module: Any) -> None:
            self._rows.phase_end()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self._rows.snap("Training end", end=False)

        def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
            # Lightning calls this after its own teardown
            if stage == "fit":
                self._rows.snap("After teardown", end=True)

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self._rows.exception(exception)

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
