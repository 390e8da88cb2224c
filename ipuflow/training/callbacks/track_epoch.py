"""Keeps ``model.epoch`` equal to the number of epochs completed (for models that anneal by epoch)."""

from __future__ import annotations

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent


@TrainerCallback.register("track_epoch_callback")  # AllenNLP 2.10's name, for ported configs
@TrainerCallback.register("track_epoch")
class TrackEpochCallback(TrainerCallback):
    """Sets ``trainer.model.epoch``: the epochs completed at start, ``epoch + 1`` after each epoch."""

    def on_train_begin(self, event: TrainerEvent) -> None:
        setattr(event.trainer.model, "epoch", event.state.epochs_completed)  # noqa: B010 (a plain attribute on a Module)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        assert event.epoch is not None
        setattr(event.trainer.model, "epoch", event.epoch + 1)  # noqa: B010
