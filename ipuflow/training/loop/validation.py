"""Scoring the model on validation and test data through an inference executor, with an
`on_prediction_step` event after every batch."""

from __future__ import annotations

import copy
import itertools
from typing import Any, Dict, Optional


from ipuflow.evaluation.example_scoring import ExampleScoring, evaluate_examples
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.training.checkpoints.best_weights import BestWeights
from ipuflow.training.events import VALIDATION, EventDispatch
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.optim.moving_average import MovingAverage
from ipuflow.training.state.trainer_state import TrainerState


def check_validation_metric(tracker: MetricTracker, model: Model, examples: Optional[ExampleScoring] = None) -> None:
    """Refuse, before training, a validation metric that validation will not produce. The names are
    the loss, what the untrained model's `get_metrics` returns and the postprocessor's metrics (with
    `examples`); a model that names no metric before it has seen data is not checked (its names may
    depend on the data)."""
    try:
        names = list(model.get_metrics(reset=False))
    except Exception:  # noqa: BLE001 - a model whose metrics need data first: validation will say
        return
    if names:
        tracker.check_names([*names, "loss", *(examples.postprocessor.metric_names() if examples is not None else ())])


def score(model: Model, executor: StepExecutor, loader: Any, events: EventDispatch, split: str,
          epoch: Optional[int], examples: Optional[ExampleScoring] = None) -> Dict[str, float]:
    """`evaluate` under no-grad, firing `on_prediction_step` (with `split`) after every batch; with
    `examples`, its postprocessor's metrics join (and win over) the model's."""
    batch_numbers = itertools.count(1)

    def report_batch(outputs: Any, batch: Any) -> None:
        events.fire("on_prediction_step", epoch=epoch, batch_number=next(batch_numbers), batch=batch,
                    outputs=outputs, split=split)

    return evaluate_examples(model, executor, loader, examples, on_outputs=report_batch)


class Validation:
    """Validations over `loader` with the training executor's inference twin (`executor`), each
    recorded in the metric `tracker` and the state's log history, then reported by `on_evaluate`.

    The training executor detaches first; the moving average's weights are swapped in for the pass
    and out after it; the model's training metrics accumulated so far survive a validation within an
    epoch (`keeps_training_metrics`, output mode "all"), since scoring resets them.
    """

    def __init__(self, model: Model, training_executor: StepExecutor, loader: Any, tracker: MetricTracker,
                 moving_average: Optional[MovingAverage], keeps_training_metrics: bool, events: EventDispatch,
                 examples: Optional[ExampleScoring] = None) -> None:
        check_validation_metric(tracker, model, examples)  # before training, not after the first epoch
        self.model = model
        self.tracker = tracker
        self.training_executor = training_executor
        self.executor = training_executor.inference_executor()
        self.loader = loader
        self._moving_average = moving_average
        self._keeps_training_metrics = keeps_training_metrics
        self._events = events
        self.examples = examples

    def validate(self, epoch: int, state: TrainerState) -> Dict[str, float]:
        """One validation of `epoch`'s weights: its metrics, recorded and reported; when they are the
        best so far, `state` then records them as such (`best_metric`, `best_epoch`, where). As in the
        Hugging Face Trainer, `on_evaluate` still sees the previous `state.best_metric`."""
        metrics = self._run(epoch)
        self.tracker.add_metrics(metrics)
        state.log_history.append({**{f"validation_{key}": value for key, value in metrics.items()},
                                  "epoch": state.epoch, "step": state.global_step})
        self._events.fire("on_evaluate", epoch=epoch, metrics=metrics, split=VALIDATION)
        if self.tracker.is_best_so_far():
            state.best_metric = self.tracker.reported_value(metrics)
            self.tracker.best_epoch_metrics = dict(metrics)
            BestWeights.mark(state, epoch)
        return metrics

    def _run(self, epoch: int) -> Dict[str, float]:
        if self.training_executor.is_attached:
            self.training_executor.detach()
        if self._moving_average is not None:
            self.training_executor.copy_weights_to_host()
            self._moving_average.assign_average_value()
            self.executor.copy_weights_to_device()
        training_metric_state = copy.deepcopy(self.model.metrics_state_dict()) if self._keeps_training_metrics else None
        try:
            return score(self.model, self.executor, self.loader, self._events, VALIDATION, epoch, self.examples)
        finally:
            if training_metric_state is not None:
                self.model.load_metrics_state_dict(training_metric_state)
            if self._moving_average is not None:
                self._moving_average.restore()
                self.training_executor.copy_weights_to_device()
            if self.executor.is_attached and self.executor is not self.training_executor:
                # Give the device back to the training executor, which re-attaches on its next call.
                self.executor.detach()
