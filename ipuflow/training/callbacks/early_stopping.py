"""Stops training when a validation metric has not improved for a number of validations."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Union

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent
from ipuflow.training.state.metric_tracker import MetricTracker

logger = logging.getLogger(__name__)


@TrainerCallback.register("early_stopping")
class EarlyStoppingCallback(TrainerCallback):
    """Asks the trainer to stop after `patience` validations without a strict improvement of
    `validation_metric` (signed like the trainer's). Independent of the trainer's own `patience`,
    so it can watch another metric; it counts every validation, `validation_interval` ones included.

    patience: validations without a strict improvement after which it asks the trainer to stop.
    validation_metric: the metric to watch, e.g. "-loss" or "+accuracy", or a list whose signed values are summed.
    """

    def __init__(
        self, serialization_dir: str, patience: int, validation_metric: Union[str, List[str]] = "-loss"
    ) -> None:
        super().__init__(serialization_dir)
        self._tracker = MetricTracker(validation_metric, patience)
        self._patience = patience
        self._metric_name = validation_metric if isinstance(validation_metric, str) else " + ".join(validation_metric)

    def on_evaluate(self, event: TrainerEvent) -> None:
        assert event.metrics is not None
        self._tracker.add_metrics(event.metrics)
        if self._tracker.should_stop_early() and not event.control.should_stop:
            logger.info(
                "Early stopping: %s has not improved in the last %d validation(s) (the callback's patience); "
                "stopping training.",
                self._metric_name, self._patience,
            )
            event.control.should_stop = True

    def state_dict(self) -> Dict[str, Any]:
        return {"tracker": self._tracker.state_dict()}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self._tracker.load_state_dict(state_dict["tracker"])
