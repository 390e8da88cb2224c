"""Scoring the model on validation and test data through an inference executor, with an
`on_prediction_step` event after every batch."""

from __future__ import annotations

import copy
import itertools
from typing import Any, Dict, List, Mapping, Optional, Union


from ipuflow.config import ConfigurationError
from ipuflow.evaluation.example_scoring import ExampleScoring, evaluate_examples
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.training.checkpoints.best_weights import BestWeights
from ipuflow.training.events import VALIDATION, EventDispatch
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.optim.moving_average import MovingAverage
from ipuflow.training.state.trainer_state import TrainerState


ValidationLoaders = Union[Any, Dict[str, Any]]
"""A trainer's validation data: one loader, or {name: loader} for several sets."""
ValidationExamples = Union[ExampleScoring, Dict[str, ExampleScoring]]
"""How validations score examples: one `ExampleScoring`, or {name: scoring} for several sets."""


def named_sets(loaders: Any) -> Dict[str, Any]:
    """{set name: loader} from the trainer's `validation_data_loader`: ``{"": loader}`` for one set
    (its metrics keep their names), the mapping itself for several (metrics named ``<name>_<metric>``)."""
    if loaders is None:
        return {}
    return dict(loaders) if isinstance(loaders, Mapping) else {"": loaders}


def set_metrics(name: str, metrics: Dict[str, float]) -> Dict[str, float]:
    """One set's metrics as the validation reports them: ``<name>_<metric>`` (unchanged for the one set)."""
    return {f"{name}_{key}" if name else key: value for key, value in metrics.items()}


def check_set_prefixes(tracker: MetricTracker, set_names: List[str]) -> None:
    """With several validation sets (`set_names`), refuse a tracked metric that names none of them."""
    for sign, metric in tracker.tracked_metrics if set_names else ():
        if not any(metric.startswith(f"{name}_") for name in set_names):
            signed = f"{'+' if sign > 0 else '-'}{set_names[0]}_{metric}"
            raise ConfigurationError(
                f"{metric!r} is no validation set's metric: with several validation sets each metric is named "
                f"<set>_<metric>, e.g. {signed!r} (the sets: {', '.join(set_names)}).", key="validation_metric")


def check_validation_metric(tracker: MetricTracker, model: Model, examples: Dict[str, Optional[ExampleScoring]]) -> None:
    """Refuse, before training, a validation metric that validation will not produce. The names are
    the loss, what the untrained model's `get_metrics` returns and the postprocessor's metrics (with
    `examples`), for each set (`examples` holds every set's name); a model that names no metric before
    it has seen data is not checked (its names may depend on the data)."""
    check_set_prefixes(tracker, [name for name in examples if name])
    try:
        names = list(model.get_metrics(reset=False))
    except Exception:  # noqa: BLE001 - a model whose metrics need data first: validation will say
        return
    if not names:
        return
    reported: List[str] = []
    for name, scoring in examples.items():
        metrics = [*names, "loss", *(scoring.postprocessor.metric_names() if scoring is not None else ())]
        reported += list(set_metrics(name, dict.fromkeys(metrics, 0.0)))
    tracker.check_names(reported)


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
    """Validations over `loader` (or {name: loader}: several sets, each scored and its metrics named
    ``<name>_<metric>``, with `examples` then {name: scoring}) with the training executor's inference
    twin (`executor`), each recorded in the metric `tracker` and the state's log history, then
    reported by `on_evaluate` (once, with every set's metrics).

    The training executor detaches first; the moving average's weights are swapped in for the pass
    and out after it; the model's training metrics accumulated so far survive a validation within an
    epoch (`keeps_training_metrics`, output mode "all"), since scoring resets them.
    """

    def __init__(self, model: Model, training_executor: StepExecutor, loader: Any, tracker: MetricTracker,
                 moving_average: Optional[MovingAverage], keeps_training_metrics: bool, events: EventDispatch,
                 examples: Optional[ValidationExamples] = None) -> None:
        self.sets = named_sets(loader)
        by_set = examples if isinstance(examples, Mapping) else {"": examples}
        self._examples = {name: by_set.get(name) for name in self.sets}
        check_validation_metric(tracker, model, self._examples)  # before training, not after the first epoch
        self.model = model
        self.tracker = tracker
        self.training_executor = training_executor
        self.executor = training_executor.inference_executor()
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
            metrics: Dict[str, float] = {}
            for name, loader in self.sets.items():
                scored = score(self.model, self.executor, loader, self._events, VALIDATION, epoch, self._examples[name])
                metrics.update(set_metrics(name, scored))
            return metrics
        finally:
            if training_metric_state is not None:
                self.model.load_metrics_state_dict(training_metric_state)
            if self._moving_average is not None:
                self._moving_average.restore()
                self.training_executor.copy_weights_to_device()
            if self.executor.is_attached and self.executor is not self.training_executor:
                # Give the device back to the training executor, which re-attaches on its next call.
                self.executor.detach()
