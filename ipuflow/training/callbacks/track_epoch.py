"""Keeps ``model.epoch`` equal to the number of epochs completed (for models that anneal by epoch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from ipuflow.training.callbacks.callback import TrainerCallback

if TYPE_CHECKING:
    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer


@TrainerCallback.register("track_epoch")
class TrackEpochCallback(TrainerCallback):
    """Sets ``trainer.model.epoch``: the epochs completed at start, ``epoch + 1`` after each epoch."""

    def on_start(self, trainer: "GradientDescentTrainer", is_primary: bool = True, **kwargs: Any) -> None:
        super().on_start(trainer, is_primary, **kwargs)
        setattr(trainer.model, "epoch", trainer.epochs_completed)  # noqa: B010 (a plain attribute on a Module)

    def on_epoch(
        self, trainer: "GradientDescentTrainer", metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs: Any
    ) -> None:
        setattr(trainer.model, "epoch", epoch + 1)  # noqa: B010
