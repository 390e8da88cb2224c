"""The one-method epoch callback (AllenNLP 1.x style), listed under ``epoch_callbacks``, and the
adapter that runs it on the trainer's one event dispatch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from ipuflow.config import Registrable
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView


class EpochCallback(Registrable):
    """Called once before training with ``epoch=-1`` and ``metrics={}``, then after every epoch."""

    def __call__(
        self, trainer: "TrainerView", metrics: Dict[str, Any], epoch: int, is_primary: bool = True
    ) -> None:
        """Handle the end of `epoch`."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the callback holds (files, writers); called once when `train()` ends, also after an error."""


class EpochCallbackAdapter(TrainerCallback):
    """Runs an `EpochCallback` on the one dispatch: with epoch -1 and no metrics at `on_train_begin`,
    after every epoch at `on_epoch_end`, and closes it at `on_train_end`."""

    def __init__(self, callback: EpochCallback, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.callback = callback

    def on_train_begin(self, event: TrainerEvent) -> None:
        self.callback(event.trainer, {}, -1, is_primary=event.is_primary)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        assert event.metrics is not None and event.epoch is not None
        self.callback(event.trainer, event.metrics, event.epoch, is_primary=event.is_primary)

    def on_train_end(self, event: TrainerEvent) -> None:
        self.callback.close()
