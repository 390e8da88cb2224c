"""The one-method batch callback (AllenNLP 1.x style), listed under ``batch_callbacks``, and the
adapter that runs it on the trainer's one event dispatch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from ipuflow.config import Registrable
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import VALIDATION, TrainerEvent

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView


class BatchCallback(Registrable):
    """Called after every training host call and every validation batch."""

    def __call__(
        self,
        trainer: "TrainerView",
        batch: Mapping[str, Any],
        outputs: Mapping[str, Any],
        batch_metrics: Optional[Dict[str, float]],
        epoch: int,
        batch_number: int,
        is_training: bool,
        is_primary: bool = True,
    ) -> None:
        """Handle one batch; `batch_metrics` is None except at logging points."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the callback holds (files, writers); called once when `train()` ends, also after an error."""


class BatchCallbackAdapter(TrainerCallback):
    """Runs a `BatchCallback` on the one dispatch: after every training host call (`on_step_end`,
    with the logs of a logging point as `batch_metrics`) and every validation batch
    (`on_prediction_step` of the validation split; test batches are not shown to it), and closes
    it at `on_train_end`."""

    def __init__(self, callback: BatchCallback, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.callback = callback

    def on_step_end(self, event: TrainerEvent) -> None:
        assert event.batch is not None and event.outputs is not None
        self.callback(event.trainer, event.batch, event.outputs, event.logs, event.epoch,  # type: ignore[arg-type]
                      event.batch_number, True, is_primary=event.is_primary)  # type: ignore[arg-type]

    def on_prediction_step(self, event: TrainerEvent) -> None:
        if event.split == VALIDATION:
            assert event.batch is not None and event.outputs is not None
            self.callback(event.trainer, event.batch, event.outputs, None, event.epoch,  # type: ignore[arg-type]
                          event.batch_number, False, is_primary=event.is_primary)  # type: ignore[arg-type]

    def on_train_end(self, event: TrainerEvent) -> None:
        self.callback.close()
