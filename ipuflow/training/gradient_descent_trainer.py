"""GradientDescentTrainer: epochs of host calls through a step executor, validation, metrics files,
checkpoints and exact resume (AllenNLP 2.10's loop, design.md §4). Construction from a config is in
`trainer_construction`, the best weights file in `best_weights`, the checkpointed state in
`trainer_state` and `checkpoint_state`."""

from __future__ import annotations

import contextlib
import copy
import datetime
import itertools
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch

from ipuflow.config import ConfigurationError
from ipuflow.distributed.agreement import agree_on_requests
from ipuflow.evaluation.evaluator import evaluate
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.storage import write_json_atomically
from ipuflow.training.best_weights import BEST_WEIGHTS, BestWeights
from ipuflow.training.callbacks.batch_callback import BatchCallback, BatchCallbackAdapter
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.callbacks.console_metrics import ConsoleMetricsCallback
from ipuflow.training.callbacks.epoch_callback import EpochCallback, EpochCallbackAdapter
from ipuflow.training.callbacks.progress import ProgressCallback
from ipuflow.training.callbacks.tensorboard import TensorBoardCallback
from ipuflow.training.checkpoint_state import StatefulPart, collect_training_state, restore_training_state
from ipuflow.training.checkpointer import Checkpointer, TrainerCheckpoint
from ipuflow.training.events import TEST, VALIDATION, EventDispatch, TrainerControl
from ipuflow.training.interruption import InterruptListener, NonFiniteLossError, TrainingInterrupted
from ipuflow.training.lr_schedulers.learning_rate_scheduler import LearningRateScheduler
from ipuflow.training.metric_tracker import MetricTracker
from ipuflow.training.momentum_schedulers import MomentumScheduler
from ipuflow.training.moving_average import MovingAverage
from ipuflow.training.rng_state import HostRngState
from ipuflow.training.run_status import (
    STOPPED_AT_MAX_STEPS, STOPPED_AT_NUM_EPOCHS, STOPPED_BY_CALLBACK, STOPPED_EARLY, RunStatus,
)
from ipuflow.training.running_loss import RunningLoss, is_finite
from ipuflow.training.scheduler import Scheduler
from ipuflow.training.trainer import Trainer
from ipuflow.training.trainer_construction import from_partial_objects
from ipuflow.training.trainer_state import TRAINER_STATE_NAME, TrainerState, is_primary

logger = logging.getLogger(__name__)

__all__ = ["BEST_WEIGHTS", "DEFAULT_CALLBACKS", "GradientDescentTrainer"]

DEFAULT_CALLBACKS = (ProgressCallback, ConsoleMetricsCallback, TensorBoardCallback)


def _hyperparameters(schedulers: List[Scheduler]) -> List[Any]:
    return [
        [group.get(scheduler.param_group_field) for group in scheduler.optimizer.param_groups]
        for scheduler in schedulers
    ]


@Trainer.register("gradient_descent", constructor="from_partial_objects")
class GradientDescentTrainer(Trainer):
    """Trains `model` with `executor` (which owns forward, backward and the optimizer step).

    Where training stands is `state` (a `TrainerState`: `global_step` = optimizer updates,
    `epochs_completed`, `batches_in_epoch_completed` = host calls in the current epoch, `host_calls`,
    `samples_seen`...), and every event goes through one dispatch to the callbacks (docs/training.md).
    The running training loss is summed on the device and read only every `log_interval` optimizer
    updates (at the host call that reaches a multiple), before checkpoints and at epoch ends; a
    NaN/inf loss read there stops training with `NonFiniteLossError`. `validation_interval` also
    validates every N optimizer updates; `max_steps` ends training after N optimizer updates (with
    a validation, metrics and best weights as at an epoch end, and a checkpoint, so a later run
    with a larger limit continues).

    The run's status (`RunStatus`: training, or stopped and why) is saved with every checkpoint, and
    the moment training stops is always checkpointed, so a resumed run that had stopped stays
    stopped unless a limit it stopped at (`num_epochs`, `max_steps`) was raised. Which weights are
    the best is part of the checkpointed state too, so resuming repairs `best.safetensors` if a crash
    came between a checkpoint and writing them.
    """

    from_partial_objects = classmethod(from_partial_objects)

    def __init__(
        self,
        model: Model,
        executor: StepExecutor,
        data_loader: Any,
        optimizer: Optional[torch.optim.Optimizer] = None,
        patience: Optional[int] = None,
        validation_metric: Union[str, List[str]] = "-loss",
        validation_data_loader: Optional[Any] = None,
        num_epochs: int = 20,
        serialization_dir: Optional[str] = None,
        checkpointer: Optional[Checkpointer] = None,
        learning_rate_scheduler: Optional[LearningRateScheduler] = None,
        momentum_scheduler: Optional[MomentumScheduler] = None,
        moving_average: Optional[MovingAverage] = None,
        callbacks: Optional[List[TrainerCallback]] = None,
        batch_callbacks: Optional[List[BatchCallback]] = None,
        epoch_callbacks: Optional[List[EpochCallback]] = None,
        grad_clipping: Optional[float] = None,
        validation_interval: Optional[int] = None,
        max_steps: Optional[int] = None,
        log_interval: int = 10,
        enable_default_callbacks: bool = True,
    ) -> None:
        serialization_dir = serialization_dir or tempfile.mkdtemp(prefix="ipuflow-")
        super().__init__(serialization_dir)
        os.makedirs(serialization_dir, exist_ok=True)
        self._check_arguments(executor, patience, validation_data_loader, grad_clipping, num_epochs=num_epochs,
                              validation_interval=validation_interval, max_steps=max_steps, log_interval=log_interval)
        self.model = model
        self.executor = executor
        self.optimizer = optimizer
        self.data_loader = data_loader
        self.validation_data_loader = validation_data_loader
        self.validation_executor: Optional[StepExecutor] = (
            executor.inference_executor() if validation_data_loader is not None else None
        )
        self._num_epochs = num_epochs
        self._metric_tracker = MetricTracker(validation_metric, patience)
        self._checkpointer = checkpointer
        self._learning_rate_scheduler = learning_rate_scheduler
        self._momentum_scheduler = momentum_scheduler
        self._schedulers: List[Scheduler] = [s for s in (learning_rate_scheduler, momentum_scheduler) if s is not None]
        self._moving_average = moving_average
        self._validation_interval = validation_interval
        self._max_steps = max_steps
        self._log_interval = log_interval
        plan = getattr(getattr(executor, "options", None), "plan", None)
        self._outputs_cover_batch = getattr(plan, "output_mode", None) == "all"

        self.state = self._configured(TrainerState())
        self.control = TrainerControl()
        self._best = BestWeights(serialization_dir, model, executor, moving_average)
        self._running_loss = RunningLoss()
        self._status = RunStatus()
        self._last_saved_position: Optional[Tuple[int, int]] = None
        self._last_checkpoint: Optional[Path] = None
        self._interrupts: Optional[InterruptListener] = None
        self._clock_start = time.monotonic()
        self._seconds_before = 0.0  # spent by earlier processes of a resumed run

        callbacks = list(callbacks or [])
        if enable_default_callbacks:
            callbacks += [default(serialization_dir=serialization_dir) for default in DEFAULT_CALLBACKS
                          if not any(type(callback) is default for callback in callbacks)]
        callbacks += [BatchCallbackAdapter(callback, serialization_dir) for callback in batch_callbacks or []]
        callbacks += [EpochCallbackAdapter(callback, serialization_dir) for callback in epoch_callbacks or []]
        self._events = EventDispatch(self, callbacks)
        self._events.fire("on_init_end")

    @staticmethod
    def _check_arguments(executor: StepExecutor, patience: Optional[int], validation_data_loader: Any,
                         grad_clipping: Optional[float], **positive: Optional[int]) -> None:
        if patience is not None and validation_data_loader is None:
            logger.warning("trainer.patience is set but there is no validation data: early stopping is off")
        for key, value in positive.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"trainer.{key}: expected an int >= 1, found {value!r}")
        if grad_clipping is not None and getattr(executor.options, "max_grad_value", None) != grad_clipping:
            # Value clipping happens in the executor, on the reduced and unscaled gradient.
            raise ConfigurationError(
                f"trainer.grad_clipping ({grad_clipping}) is the executor's max_grad_value, and the executor given "
                f"has max_grad_value {executor.options.max_grad_value}; build the executor with max_grad_value={grad_clipping}"
            )

    def _configured(self, state: TrainerState) -> TrainerState:
        """`state` with the fields the configuration decides (limits, intervals, batch size)."""
        state.num_train_epochs = self._num_epochs
        updates_per_epoch = None if self.num_batches_per_epoch is None else (
            self.num_batches_per_epoch * self.executor.updates_per_call)
        planned = None if updates_per_epoch is None else updates_per_epoch * self._num_epochs
        state.max_steps = min(x for x in (planned, self._max_steps) if x is not None) if (
            planned is not None or self._max_steps is not None) else None
        state.logging_steps = self._log_interval
        state.eval_steps = self._validation_interval
        state.train_batch_size = getattr(self.data_loader, "combined_batch_size", None)
        return state

    # -- public state ----------------------------------------------------------------------

    @property
    def callbacks(self) -> List[TrainerCallback]:
        """Every callback on the dispatch: the configured ones, the defaults, then the adapters of
        `batch_callbacks` and `epoch_callbacks`."""
        return self._events.callbacks

    def add_callback(self, callback: TrainerCallback) -> None:
        """Add a callback after construction (it hears every later event)."""
        self._events.add(callback)

    @property
    def metric_tracker(self) -> MetricTracker:
        """The validation-score tracker."""
        return self._metric_tracker

    @property
    def epochs_completed(self) -> int:
        """`state.epochs_completed`."""
        return self.state.epochs_completed

    @property
    def batches_in_epoch_completed(self) -> int:
        """`state.batches_in_epoch_completed` (host calls done in the current epoch)."""
        return self.state.batches_in_epoch_completed

    @property
    def host_calls(self) -> int:
        """`state.host_calls`."""
        return self.state.host_calls

    @property
    def optimizer_updates(self) -> int:
        """`state.global_step`."""
        return self.state.global_step

    @property
    def samples_seen(self) -> int:
        """`state.samples_seen`."""
        return self.state.samples_seen

    @property
    def num_batches_per_epoch(self) -> Optional[int]:
        """Host calls per training epoch (None if the loader has no length)."""
        try:
            return len(self.data_loader)
        except TypeError:
            return None

    @property
    def num_validation_batches(self) -> Optional[int]:
        """Host calls per validation (None without validation data or a length)."""
        try:
            return len(self.validation_data_loader) if self.validation_data_loader is not None else None
        except TypeError:
            return None

    @property
    def computes_training_metrics(self) -> bool:
        """Whether the model's metrics are updated on training batches: only when the executor
        returns every micro-batch's outputs (``output_mode: "all"``)."""
        return self._outputs_cover_batch

    def get_best_weights_path(self) -> Optional[str]:
        return self._best.existing_path()

    @property
    def run_status(self) -> RunStatus:
        """Where the run stands (as of the latest checkpoint or later)."""
        return self._status

    def record_run_status(self, status: RunStatus) -> None:
        """Adopt `status` (e.g. test set evaluated, archived) and record it with the latest checkpoint."""
        self._status = status
        if self._checkpointer is not None:
            self._checkpointer.update_run_status(status.to_dict())

    # -- training --------------------------------------------------------------------------

    def train(self) -> Dict[str, Any]:
        """Restore the latest checkpoint if any, train, and return the last epoch's metrics (with
        ``best_*``); the model is left holding the best weights."""
        self._clock_start = time.monotonic()
        with InterruptListener() as interrupts:
            self._interrupts = interrupts
            try:
                self._restore_checkpoint()
                if self._status.training_finished:
                    logger.info("Nothing left to train in %s: %s.", self.serialization_dir, self._status.describe())
                    self._best.load_into_model(self.state)
                    return dict(self._status.metrics)
                # Every length bucket is compiled now, so that a later bucket is not taken for a bad input.
                self.executor.compile_for(self.data_loader)
                if self.validation_executor is not None and self.validation_data_loader is not None:
                    self.validation_executor.compile_for(self.validation_data_loader)
                return self._train_between_events(interrupts)
            finally:
                self._interrupts = None

    def _train_between_events(self, interrupts: InterruptListener) -> Dict[str, Any]:
        """`on_train_begin`, the epochs, and `on_train_end` always (also after an error)."""
        metrics: Optional[Dict[str, Any]] = None
        epoch: Optional[int] = None
        error: Optional[BaseException] = None
        self._events.fire("on_train_begin")
        try:
            metrics, epoch = self._try_train()
            self._write_trainer_state()
            if interrupts.interrupted:
                # The signal came as training ended; the stop is checkpointed, so -r only finishes the run.
                raise TrainingInterrupted(
                    f"{interrupts.signal_name} arrived as training ended ({self._status.describe()}); the final "
                    f"checkpoint is saved in {self.serialization_dir}. `ipuflow train CONFIG -s "
                    f"{self.serialization_dir} -r` finishes the run (test evaluation and archive) without training."
                )
            return metrics
        except BaseException as raised:
            error = raised
            raise
        finally:
            self._events.fire("on_train_end", metrics=metrics if error is None else None, epoch=epoch, error=error)

    def _try_train(self) -> Tuple[Dict[str, Any], Optional[int]]:
        metrics: Dict[str, Any] = self._best_metrics()
        last_epoch: Optional[int] = None
        self._apply_step_schedules()
        for epoch in range(self.state.epochs_completed, self._num_epochs):
            epoch_start = time.monotonic()
            finished = self._train_epoch(epoch)
            last_epoch = epoch
            metrics = self._end_epoch(epoch, epoch_start) if finished else self._stop_within_epoch(epoch, epoch_start)
            if self._status.training_finished:
                break
        if not self._status.training_finished:  # no epoch was left to run
            self._stop(STOPPED_AT_NUM_EPOCHS, metrics)
            if self._checkpointer is not None:
                self._save_checkpoint(force=True)
        self._best.load_into_model(self.state)
        return metrics, last_epoch

    def _stop_reason(self) -> Optional[str]:
        """Why training ends at this point, if it does."""
        if self._metric_tracker.should_stop_early():
            return STOPPED_EARLY
        if self.control.should_stop:
            return STOPPED_BY_CALLBACK
        if self._reached_max_steps():
            return STOPPED_AT_MAX_STEPS
        if self.state.batches_in_epoch_completed == 0 and self.state.epochs_completed >= self._num_epochs:
            return STOPPED_AT_NUM_EPOCHS
        return None

    def _stop(self, reason: str, metrics: Dict[str, Any]) -> None:
        self._status = RunStatus(
            stopped=reason, epochs_completed=self.state.epochs_completed, optimizer_updates=self.state.global_step,
            num_epochs=self._num_epochs, max_steps=self._max_steps, metrics=dict(metrics),
        )
        logger.info("Training stopped: %s.", self._status.describe())

    def _reached_max_steps(self) -> bool:
        return self._max_steps is not None and self.state.global_step >= self._max_steps

    def _train_epoch(self, epoch: int) -> bool:
        """Run the epoch's remaining host calls; False if training stopped before its end."""
        loader, state, control = self.data_loader, self.state, self.control
        loader.set_epoch(epoch)
        start = state.batches_in_epoch_completed
        if start == 0:
            self._running_loss.reset()
        batches = loader.iter_from(start) if hasattr(loader, "iter_from") else itertools.islice(iter(loader), start, None)
        num_batches = self.num_batches_per_epoch
        self._events.fire("on_epoch_begin", epoch=epoch)
        for batch_number, batch in enumerate(batches, start + 1):
            self._events.fire("on_step_begin", epoch=epoch, batch_number=batch_number, batch=batch)
            updates = self._host_call(batch, batch_number, epoch, num_batches)
            agree_on_requests(control, self._interrupts)  # under torchrun every rank acts on any rank's request
            last_of_epoch = num_batches is not None and batch_number >= num_batches
            if control.should_epoch_stop:
                control.should_epoch_stop = False
                return True
            if not last_of_epoch and (control.should_stop or self._reached_max_steps()):
                return False  # the stop validates and saves (_stop_within_epoch)
            if not last_of_epoch:
                self._maybe_validate_within_epoch(epoch, updates)
                if self._checkpointer is not None and (control.should_save or self._checkpointer.should_save(
                        state.epochs_completed, state.batches_in_epoch_completed)):
                    self._save_checkpoint()
                control.should_save = False
            if self._interrupts is not None and self._interrupts.interrupted:
                self._stop_for_signal(self._interrupts.signal_name or "a signal")
        return True

    def _host_call(self, batch: Any, batch_number: int, epoch: int, num_batches: Optional[int]) -> int:
        """One host call and its bookkeeping, `on_step_end` and `on_log`; the optimizer updates it made."""
        state = self.state
        result = self.executor(batch)
        state.host_calls += 1
        state.global_step += result.optimizer_updates
        state.samples_seen += result.samples
        state.batches_in_epoch_completed = batch_number
        state.epoch = state.epochs_completed + (batch_number / num_batches if num_batches else 0.0)
        if result.loss is not None:
            self._running_loss.add(result.loss)
        if self._moving_average is not None:
            self.executor.copy_weights_to_host()
            self._moving_average.apply(state.global_step)
        if self._outputs_cover_batch:
            self.model.update_metrics(result.outputs, batch)
        logs = None
        if self.control.should_log or self._crossed(self._log_interval, result.optimizer_updates):
            logs = self._read_training_metrics(result.loss)
        self._events.fire("on_step_end", epoch=epoch, batch_number=batch_number, batch=batch,
                          outputs=result.outputs, logs=logs)
        if logs is None and self.control.should_log:  # asked for during on_step_end
            logs = self._read_training_metrics(result.loss)
        if logs is not None:
            self.control.should_log = False
            state.log_history.append({**logs, "epoch": state.epoch, "step": state.global_step})
            self._events.fire("on_log", epoch=epoch, batch_number=batch_number, logs=logs)
        # After the logs: their `lr` is the one this call used.
        self._apply_step_schedules()
        return result.optimizer_updates

    def _crossed(self, interval: Optional[int], updates_this_call: int) -> bool:
        """Whether the last call's updates reached a multiple of `interval` optimizer updates."""
        updates = self.state.global_step
        return interval is not None and updates // interval > (updates - updates_this_call) // interval

    def _maybe_validate_within_epoch(self, epoch: int, updates_this_call: int) -> None:
        crossed = self._crossed(self._validation_interval, updates_this_call)
        if (crossed or self.control.should_validate) and self.validation_data_loader is not None:
            self._check_loss_before_saving()
            validation_metrics = self._validate(epoch)
            if self._metric_tracker.is_best_so_far():
                self._record_best(epoch, validation_metrics)
                self._best.write(self.state, checkpoint_here=None)
        self.control.should_validate = False

    def _end_epoch(self, epoch: int, epoch_start: float) -> Dict[str, Any]:
        """Validation, the metrics file, epoch-based schedules, callbacks, checkpoint and best weights."""
        training_metrics = self._epoch_training_metrics()
        validation_metrics, is_best = self._validate_for_metrics(epoch)
        # The end-of-epoch validation answers a request made on the epoch's last call.
        self.control.should_validate = False
        metrics = self._write_epoch_metrics(epoch, epoch_start, training_metrics, validation_metrics)

        score = self._metric_tracker.combined_score(validation_metrics) if validation_metrics is not None else None
        before = _hyperparameters(self._schedulers)
        for scheduler in self._schedulers:
            scheduler.step(score)
        if _hyperparameters(self._schedulers) != before:
            self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]

        self._events.fire("on_epoch_end", epoch=epoch, metrics=metrics)
        self.state.epochs_completed += 1
        self.state.batches_in_epoch_completed = 0
        self.state.epoch = float(self.state.epochs_completed)
        self._save_position(metrics, is_best)
        agree_on_requests(self.control, self._interrupts)
        if self._interrupts is not None and self._interrupts.interrupted and not self._status.training_finished:
            self._stop_for_signal(self._interrupts.signal_name or "a signal")
        return metrics

    def _stop_within_epoch(self, epoch: int, epoch_start: float) -> Dict[str, Any]:
        """A stop before the epoch's end (`max_steps`, a callback): validation, the epoch's metrics
        file so far, best weights and a checkpoint, as at an epoch end (but no epoch-based
        schedules, and the epoch's training metrics keep accumulating if a raised limit resumes it)."""
        training_metrics = self._epoch_training_metrics(reset=False)
        validation_metrics, is_best = self._validate_for_metrics(epoch)
        metrics = self._write_epoch_metrics(epoch, epoch_start, training_metrics, validation_metrics)
        self._save_position(metrics, is_best)
        return metrics

    # -- validation and test ---------------------------------------------------------------

    def _validate_for_metrics(self, epoch: int) -> Tuple[Optional[Dict[str, float]], bool]:
        """Validate if there is validation data; (metrics or None, whether these weights are the best)."""
        if self.validation_data_loader is None:
            self.state.best_epoch = epoch  # without validation the latest weights are the best
            return None, True
        validation_metrics = self._validate(epoch)
        is_best = self._metric_tracker.is_best_so_far()
        if is_best:
            self._record_best(epoch, validation_metrics)
        return validation_metrics, is_best

    def _validate(self, epoch: int) -> Dict[str, float]:
        """Validation metrics under no-grad with the inference executor (moving average swapped in);
        also recorded in the metric tracker, the log history and reported to `on_evaluate`."""
        assert self.validation_executor is not None and self.validation_data_loader is not None
        if self.executor.is_attached:
            self.executor.detach()
        if self._moving_average is not None:
            self.executor.copy_weights_to_host()
            self._moving_average.assign_average_value()
            self.validation_executor.copy_weights_to_device()
        # Validation resets the model's metrics; a validation within an epoch must not lose the
        # training metrics accumulated so far (output mode "all").
        training_metric_state = copy.deepcopy(self.model.metrics_state_dict()) if self._outputs_cover_batch else None
        try:
            validation_metrics = self._score(self.validation_executor, self.validation_data_loader, VALIDATION, epoch)
        finally:
            if training_metric_state is not None:
                self.model.load_metrics_state_dict(training_metric_state)
            if self._moving_average is not None:
                self._moving_average.restore()
                self.executor.copy_weights_to_device()
            if self.validation_executor.is_attached and self.validation_executor is not self.executor:
                # Give the device back to the training executor, which re-attaches on its next call.
                self.validation_executor.detach()
        self._metric_tracker.add_metrics(validation_metrics)
        self.state.log_history.append({**{f"validation_{key}": value for key, value in validation_metrics.items()},
                                       "epoch": self.state.epoch, "step": self.state.global_step})
        self._events.fire("on_evaluate", epoch=epoch, metrics=validation_metrics, split=VALIDATION)
        return validation_metrics

    def _score(self, executor: StepExecutor, loader: Any, split: str, epoch: Optional[int]) -> Dict[str, float]:
        """`evaluate` under no-grad, with `on_prediction_step` after every batch."""
        batch_numbers = itertools.count(1)

        def report_batch(outputs: Any, batch: Any) -> None:
            self._events.fire("on_prediction_step", epoch=epoch, batch_number=next(batch_numbers), batch=batch,
                              outputs=outputs, split=split)

        with torch.no_grad():
            return evaluate(self.model, executor, loader, on_outputs=report_batch)

    def evaluate_test_set(self, executor: StepExecutor, loader: Any) -> Dict[str, float]:
        """Score the model as it is (after `train()`: the best weights) on a test loader with an
        inference `executor` compiled for it; fires `on_prediction_step` per batch and `on_predict`."""
        metrics = self._score(executor, loader, TEST, None)
        self._events.fire("on_predict", metrics=metrics, split=TEST)
        return metrics

    # -- metrics ---------------------------------------------------------------------------

    def _write_epoch_metrics(self, epoch: int, epoch_start: float, training_metrics: Dict[str, float],
                             validation_metrics: Optional[Dict[str, float]]) -> Dict[str, Any]:
        metrics: Dict[str, Any] = {
            "epoch": epoch,
            "training_duration": str(datetime.timedelta(seconds=self._training_seconds())),
            "epoch_duration": str(datetime.timedelta(seconds=time.monotonic() - epoch_start)),
        }
        metrics.update({f"training_{key}": value for key, value in training_metrics.items()})
        if validation_metrics is not None:
            metrics.update({f"validation_{key}": value for key, value in validation_metrics.items()})
        metrics.update({"host_calls": self.state.host_calls, "optimizer_updates": self.state.global_step,
                        "samples_seen": self.state.samples_seen})
        metrics.update(self._best_metrics())
        if is_primary():
            write_json_atomically(Path(self.serialization_dir) / f"metrics_epoch_{epoch}.json", metrics)  # type: ignore[arg-type]
        return metrics

    def _best_metrics(self) -> Dict[str, Any]:
        best: Dict[str, Any] = {}
        if self.state.best_epoch is not None:
            best["best_epoch"] = self.state.best_epoch
        for key, value in self._metric_tracker.best_epoch_metrics.items():
            best[f"best_validation_{key}"] = value
        return best

    def _record_best(self, epoch: int, validation_metrics: Dict[str, float]) -> None:
        self.state.best_epoch = epoch
        self.state.best_metric = self._metric_tracker.reported_value(validation_metrics)
        self._metric_tracker.best_epoch_metrics = dict(validation_metrics)
        BestWeights.mark(self.state, epoch)

    def _training_seconds(self) -> float:
        """Seconds spent training this run, earlier processes of a resumed run included."""
        self.state.training_seconds = self._seconds_before + time.monotonic() - self._clock_start
        return self.state.training_seconds

    # -- loss reading (the only device syncs of the loop) ---------------------------------------

    def _check_finite(self, value: Optional[float]) -> None:
        if not is_finite(value):
            kept = f"the last good checkpoint ({self._last_checkpoint.name}) is kept" if self._last_checkpoint else "no checkpoint was saved"
            raise NonFiniteLossError(
                f"The training loss became {value} in epoch {self.state.epochs_completed} by optimizer update "
                f"{self.state.global_step}; training stopped and {kept}. Lower the learning rate, clip gradients "
                "(trainer.grad_norm) or check the data."
            )

    def _read_training_metrics(self, batch_loss: Optional[torch.Tensor]) -> Dict[str, float]:
        logs: Dict[str, float] = {}
        if self._running_loss.started and batch_loss is not None:
            logs["loss"], logs["batch_loss"] = self._running_loss.mean_and_last(batch_loss)
            self._check_finite(logs["loss"])
        if self._outputs_cover_batch:
            logs.update(self.model.get_metrics(reset=False))
        if self.optimizer is not None:
            for index, group in enumerate(self.optimizer.param_groups):
                logs["lr" if index == 0 else f"lr_group{index}"] = float(group["lr"])
        return logs

    def _epoch_training_metrics(self, reset: bool = True) -> Dict[str, float]:
        metrics: Dict[str, float] = dict(self.model.get_metrics(reset=reset)) if self._outputs_cover_batch else {}
        loss = self._running_loss.mean()
        self._check_finite(loss)
        if loss is not None:
            metrics["loss"] = loss
        return metrics

    def _check_loss_before_saving(self) -> None:
        self._check_finite(self._running_loss.mean())

    def _apply_step_schedules(self) -> None:
        """Set step-based values for the next update; send them to the device only if they changed."""
        if not self._schedulers:
            return
        before = _hyperparameters(self._schedulers)
        for scheduler in self._schedulers:
            scheduler.step_batch(self.state.global_step + 1)
        if _hyperparameters(self._schedulers) != before:
            self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]

    # -- checkpoints -----------------------------------------------------------------------

    def _save_position(self, metrics: Dict[str, Any], is_best: bool) -> None:
        """After a validation point that ends an epoch or training: decide whether training stops,
        checkpoint (always when it stops, with the stop and the best weights' position in the
        state), then write the best weights."""
        reason = self._stop_reason()
        if reason is not None:
            if reason == STOPPED_EARLY:
                logger.info("Ran out of patience; stopping training.")
            self._stop(reason, metrics)
        if is_best:
            BestWeights.mark(self.state, self.state.best_epoch)  # type: ignore[arg-type]
        if self._checkpointer is not None and (
            reason is not None
            or self.control.should_save
            or self._checkpointer.should_save(self.state.epochs_completed, self.state.batches_in_epoch_completed)
        ):
            self._save_checkpoint(force=reason is not None)
        self.control.should_save = False
        if is_best:
            here = self._last_checkpoint if self._last_saved_position == self._position() else None
            self._best.write(self.state, checkpoint_here=here)

    def _position(self) -> Tuple[int, int]:
        return self.state.epochs_completed, self.state.batches_in_epoch_completed

    def _stateful_parts(self) -> List[StatefulPart]:
        """Every piece of training state besides the `TrainerState`, in restore order."""
        parts = [
            StatefulPart("executor", self.executor.state_dict, self.executor.load_state_dict),
            StatefulPart("metric_tracker", self._metric_tracker.state_dict, self._metric_tracker.load_state_dict),
            StatefulPart("running_loss", self._running_loss.state_dict,
                         lambda state: self._running_loss.load_state_dict(state, self.executor.device)),
            StatefulPart("callbacks", lambda: [callback.state_dict() for callback in self.callbacks],
                         self._load_callback_states),
            StatefulPart("model_metrics", self.model.metrics_state_dict, self.model.load_metrics_state_dict),
        ]
        optional: Dict[str, Any] = {"learning_rate_scheduler": self._learning_rate_scheduler,
                    "momentum_scheduler": self._momentum_scheduler, "moving_average": self._moving_average,
                    "data_loader": self.data_loader if hasattr(self.data_loader, "state_dict") else None}
        parts += [StatefulPart(name, part.state_dict, part.load_state_dict)
                  for name, part in optional.items() if part is not None]
        # Last: the executor's state restored the CPU generator too, from the same snapshot.
        rng = HostRngState()
        return parts + [StatefulPart("rng", rng.state_dict, rng.load_state_dict)]

    def _load_callback_states(self, states: List[Dict[str, Any]]) -> None:
        for callback, state in zip(self.callbacks, states):
            callback.load_state_dict(state)

    @contextlib.contextmanager
    def get_checkpoint_state(self) -> Iterator[Optional[TrainerCheckpoint]]:
        """Raw weights (a moving average's shadows travel in the training state, so resuming is
        exact), the `TrainerState` and every stateful part, as plain containers and tensors."""
        self.executor.copy_weights_to_host()
        self._training_seconds()
        training_state = collect_training_state(self.state, self._stateful_parts())
        yield TrainerCheckpoint(self.model.state_dict(), training_state, self._position(), self._status.to_dict())

    def _save_checkpoint(self, force: bool = False) -> None:
        """Checkpoint now, unless this position was just saved (`force`: save again, e.g. to record a stop)."""
        assert self._checkpointer is not None
        position = self._position()
        if self._last_saved_position == position and not force:
            return
        self._check_loss_before_saving()
        paths = self._checkpointer.save_checkpoint(self)
        self._last_saved_position = position
        if paths is not None:
            self._last_checkpoint = paths[0]
            self._write_trainer_state()
            self._events.fire("on_save", paths=paths)

    def _write_trainer_state(self) -> None:
        """`trainer_state.json` in the serialization directory (the primary process only)."""
        if is_primary():
            self.state.save(Path(self.serialization_dir) / TRAINER_STATE_NAME)  # type: ignore[arg-type]

    def _stop_for_signal(self, signal_name: str) -> None:
        if self._checkpointer is not None:
            self._save_checkpoint()
            where = f"A checkpoint was saved in {self.serialization_dir}"
        else:
            where = "No checkpointer is configured, so nothing was saved"
        raise TrainingInterrupted(
            f"Training was interrupted by {signal_name} after {self.state.global_step} optimizer updates "
            f"(epoch {self.state.epochs_completed}, {self.state.batches_in_epoch_completed} host calls into it). "
            f"{where}; resume with `ipuflow train CONFIG -s {self.serialization_dir} -r`."
        )

    def _restore_checkpoint(self) -> None:
        if self._checkpointer is None:
            return
        self._checkpointer.remove_incomplete_checkpoints()
        checkpoint = self._checkpointer.load_checkpoint()
        if checkpoint is None:
            return
        try:
            self.model.load_state_dict(checkpoint.model_state)
            self.executor.copy_weights_to_device()
            state = restore_training_state(checkpoint.training_state, self._stateful_parts(),
                                           str(self.serialization_dir))
        except RuntimeError as error:
            raise ConfigurationError(
                f"Could not resume training from the checkpoint in {self.serialization_dir}: {error}. Did you mean "
                "to use another serialization directory?"
            ) from error
        self.state = self._configured(state)
        self._seconds_before = state.training_seconds
        self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]
        self._last_saved_position = checkpoint.position
        self._last_checkpoint = self._checkpointer.paths(*checkpoint.position)[0]
        self._status = RunStatus.from_dict(checkpoint.run_status)
        logger.info("Resumed from the checkpoint at epoch %d, host call %d (%d optimizer updates)",
                    state.epochs_completed, state.batches_in_epoch_completed, state.global_step)
        if self._status.training_finished and self._status.continues_with(self._num_epochs, self._max_steps):
            logger.info("The run had stopped at its %s limit, which is now higher: training continues.",
                        self._status.stopped)
            self._status = RunStatus()
        self._best.repair(self.state, checkpoint.position, self._last_checkpoint)
