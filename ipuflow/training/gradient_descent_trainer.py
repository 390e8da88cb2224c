"""GradientDescentTrainer: epochs of host calls through a step executor, validation, metrics files,
checkpoints and exact resume (AllenNLP 2.10's loop, design.md §4)."""

from __future__ import annotations

import contextlib
import copy
import datetime
import itertools
import logging
import math
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy
import torch

from ipuflow import distributed
from ipuflow.config import ConfigurationError, Lazy
from ipuflow.distributed.agreement import agree_on_requests
from ipuflow.distributed.collectives import barrier
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.training.callbacks.batch_callback import BatchCallback
from ipuflow.training.callbacks.callback import TrainerCallback, TrainerControl
from ipuflow.training.callbacks.console_metrics import ConsoleMetricsCallback
from ipuflow.training.callbacks.epoch_callback import EpochCallback
from ipuflow.training.callbacks.progress import ProgressCallback
from ipuflow.training.callbacks.tensorboard import TensorBoardCallback
from ipuflow.evaluation.evaluator import evaluate
from ipuflow.storage import file_sha256, link_atomically, write_json_atomically
from ipuflow.training.checkpointer import Checkpointer, TrainerCheckpoint, load_weights, save_weights
from ipuflow.training.interruption import InterruptListener, NonFiniteLossError, TrainingInterrupted
from ipuflow.training.lr_schedulers.learning_rate_scheduler import LearningRateScheduler
from ipuflow.training.metric_tracker import MetricTracker
from ipuflow.training.momentum_schedulers import MomentumScheduler
from ipuflow.training.moving_average import MovingAverage
from ipuflow.training.optimizers import Optimizer
from ipuflow.training.run_status import (
    STOPPED_AT_MAX_STEPS, STOPPED_AT_NUM_EPOCHS, STOPPED_BY_CALLBACK, STOPPED_EARLY, RunStatus,
)
from ipuflow.training.scheduler import Scheduler
from ipuflow.training.trainer import Trainer

logger = logging.getLogger(__name__)

BEST_WEIGHTS = "best.safetensors"
TRAINING_STATE_VERSION = 1
DEFAULT_CALLBACKS = (ProgressCallback, ConsoleMetricsCallback, TensorBoardCallback)


def _python_rng_state() -> List[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def _set_python_rng_state(state: List[Any]) -> None:
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


def _numpy_rng_state() -> List[Any]:
    name, keys, position, has_gauss, cached = numpy.random.get_state(legacy=True)
    return [name, numpy.asarray(keys).tolist(), int(position), int(has_gauss), float(cached)]


def _set_numpy_rng_state(state: List[Any]) -> None:
    name, keys, position, has_gauss, cached = state
    numpy.random.set_state((name, numpy.asarray(keys, dtype=numpy.uint32), position, has_gauss, cached))


def _hyperparameters(schedulers: List[Scheduler]) -> List[Any]:
    return [
        [group.get(scheduler.param_group_field) for group in scheduler.optimizer.param_groups]
        for scheduler in schedulers
    ]


@Trainer.register("gradient_descent", constructor="from_partial_objects")
class GradientDescentTrainer(Trainer):
    """Trains `model` with `executor` (which owns forward, backward and the optimizer step).

    Counters: `epochs_completed`, `batches_in_epoch_completed` (host calls in the current epoch),
    `host_calls`, `optimizer_updates`, `samples_seen`. The running training loss is summed on the
    device and read only every `log_interval` optimizer updates (at the host call that reaches a
    multiple), before checkpoints and at epoch ends; a NaN/inf loss read there stops training with
    `NonFiniteLossError`. `validation_interval` also validates every N optimizer updates; `max_steps`
    ends training after N optimizer updates (with a validation, metrics and best weights as at an
    epoch end, and a checkpoint, so a later run with a larger limit continues).


    The run's status (`RunStatus`: training, or stopped and why) is saved with every checkpoint, and
    the moment training stops is always checkpointed, so a resumed run that had stopped stays
    stopped unless a limit it stopped at (`num_epochs`, `max_steps`) was raised. Which weights are
    the best is part of the checkpointed state too, so resuming repairs `best.safetensors` if a crash
    came between a checkpoint and writing them.
    """

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
        if serialization_dir is None:
            serialization_dir = tempfile.mkdtemp(prefix="ipuflow-")
        super().__init__(serialization_dir)
        os.makedirs(serialization_dir, exist_ok=True)
        if patience is not None and validation_data_loader is None:
            logger.warning("trainer.patience is set but there is no validation data: early stopping is off")
        for key, value, minimum in (
            ("num_epochs", num_epochs, 1),
            ("validation_interval", validation_interval, 1),
            ("max_steps", max_steps, 1),
            ("log_interval", log_interval, 1),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
                raise ConfigurationError(f"trainer.{key}: expected an int >= {minimum}, found {value!r}")
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
        self.control = TrainerControl()

        self._callbacks: List[TrainerCallback] = list(callbacks or [])
        if enable_default_callbacks and distributed.is_primary():  # progress and console output: rank 0's
            for default in DEFAULT_CALLBACKS:
                if not any(type(callback) is default for callback in self._callbacks):
                    self._callbacks.append(default(serialization_dir=serialization_dir))
        self._batch_callbacks: List[BatchCallback] = list(batch_callbacks or [])
        self._epoch_callbacks: List[EpochCallback] = list(epoch_callbacks or [])

        if grad_clipping is not None and getattr(executor.options, "max_grad_value", None) != grad_clipping:
            # Value clipping happens in the executor, on the reduced and unscaled gradient.
            raise ConfigurationError(
                f"trainer.grad_clipping ({grad_clipping}) is the executor's max_grad_value, and the executor given "
                f"has max_grad_value {executor.options.max_grad_value}; build the executor with max_grad_value={grad_clipping}"
            )

        plan = getattr(getattr(executor, "options", None), "plan", None)
        self._outputs_cover_batch = getattr(plan, "output_mode", None) == "all"

        self.epochs_completed = 0
        self.batches_in_epoch_completed = 0
        self.host_calls = 0
        self.optimizer_updates = 0
        self.samples_seen = 0
        self._best_epoch: Optional[int] = None
        # Where the best weights were recorded (epochs, host calls) and the SHA-256 of best.safetensors
        # once written: both travel in checkpoints, so a resume can check and repair the file.
        self._best_position: Optional[Tuple[int, int]] = None
        self._best_sha256: Optional[str] = None
        self._status = RunStatus()
        self._running_loss: Optional[torch.Tensor] = None
        self._running_calls = 0
        self._last_saved_position: Optional[Tuple[int, int]] = None
        self._last_checkpoint: Optional[Path] = None
        self._interrupts: Optional[InterruptListener] = None
        self._training_start = time.monotonic()
        self._training_seconds_before = 0.0  # spent by earlier processes of a resumed run

    # -- construction from config ----------------------------------------------------------

    @classmethod
    def from_partial_objects(
        cls,
        model: Model,
        serialization_dir: str,
        data_loader: Any,
        validation_data_loader: Optional[Any] = None,
        optimizer: Lazy[Optimizer] = Lazy(Optimizer),
        patience: Optional[int] = None,
        validation_metric: Union[str, List[str]] = "-loss",
        num_epochs: int = 20,
        checkpointer: Optional[Lazy[Checkpointer]] = Lazy(Checkpointer),
        grad_norm: Union[float, bool] = False,
        grad_clipping: Optional[float] = None,
        learning_rate_scheduler: Optional[Lazy[LearningRateScheduler]] = None,
        momentum_scheduler: Optional[Lazy[MomentumScheduler]] = None,
        moving_average: Optional[Lazy[MovingAverage]] = None,
        callbacks: Optional[List[Lazy[TrainerCallback]]] = None,
        batch_callbacks: Optional[List[Lazy[BatchCallback]]] = None,
        epoch_callbacks: Optional[List[Lazy[EpochCallback]]] = None,
        tensorboard_writer: Optional[Lazy[TensorBoardCallback]] = None,
        num_gradient_accumulation_steps: Optional[int] = None,
        no_grad: Optional[List[str]] = None,
        executor: Lazy[StepExecutor] = Lazy(StepExecutor),
        validation_interval: Optional[int] = None,
        max_steps: Optional[int] = None,
        log_interval: int = 10,
        enable_default_callbacks: bool = True,
    ) -> "GradientDescentTrainer":
        """Build every part in dependency order (see docs/training.md).

        `model`, `serialization_dir`, `data_loader` and `validation_data_loader` are injected.
        `grad_norm` (a float), `grad_clipping` and `num_gradient_accumulation_steps` are the
        executor's `max_grad_norm`, `max_grad_value` and `gradient_accumulation`; giving both
        spellings with different values is an error.

        grad_clipping: clamps each element of the reduced, unscaled gradient to ±v (the executor's max_grad_value).
        validation_interval: also validate every N optimizer updates.
        log_interval: optimizer updates between reads of the running loss and logged metrics.
        """
        if no_grad:
            patterns = [re.compile(pattern) for pattern in no_grad]
            for name, parameter in model.named_parameters():
                if any(pattern.search(name) for pattern in patterns):
                    parameter.requires_grad_(False)
        frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
        if frozen:
            logger.info("Frozen parameters: %s", ", ".join(frozen))

        parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        built_optimizer = optimizer.construct(model_parameters=parameters)
        # parameter_groups may freeze more parameters; the moving average tracks the trainable ones.
        parameters = [(name, p) for name, p in parameters if p.requires_grad]
        built_moving_average = moving_average.construct(parameters=parameters) if moving_average is not None else None

        executor_options: Dict[str, Any] = {}
        executor_config = executor.params.as_dict()

        def alias(trainer_key: str, value: Any, executor_key: str) -> None:
            configured = executor_config.get(executor_key)
            if configured is not None and configured != value:
                raise ConfigurationError(
                    f"trainer.{trainer_key} ({value}) and trainer.executor.{executor_key} ({configured}) are the same "
                    "setting with different values; give one of them"
                )
            executor_options[executor_key] = value

        if num_gradient_accumulation_steps is not None:
            alias("num_gradient_accumulation_steps", num_gradient_accumulation_steps, "gradient_accumulation")
        if grad_norm is True:
            raise ConfigurationError(
                "trainer.grad_norm: true (report the norm without clipping) is not supported: the executor "
                "computes the gradients on the device; give a float to clip the global norm to it"
            )
        if grad_norm is not False:
            alias("grad_norm", float(grad_norm), "max_grad_norm")
        if grad_clipping is not None:
            alias("grad_clipping", float(grad_clipping), "max_grad_value")
        # The executor comes before the schedulers only because the number of optimizer updates
        # per epoch depends on its options (device iterations, replication, accumulation).
        built_executor = executor.construct(model=model, optimizer=built_optimizer, training=True, **executor_options)
        data_loader.set_batch_size_factor(built_executor.batch_size_factor)
        if validation_data_loader is not None:
            validation_data_loader.set_batch_size_factor(built_executor.inference_executor().batch_size_factor)
        try:
            num_steps_per_epoch: Optional[int] = len(data_loader) * built_executor.updates_per_call
        except TypeError:
            num_steps_per_epoch = None

        built_lr_scheduler = (
            learning_rate_scheduler.construct(
                optimizer=built_optimizer,
                num_epochs=num_epochs,
                num_steps_per_epoch=num_steps_per_epoch,
                validation_metric=validation_metric,
            )
            if learning_rate_scheduler is not None
            else None
        )
        built_momentum_scheduler = (
            momentum_scheduler.construct(
                optimizer=built_optimizer,
                num_epochs=num_epochs,
                num_steps_per_epoch=num_steps_per_epoch,
                validation_metric=validation_metric,
            )
            if momentum_scheduler is not None
            else None
        )
        # The schedulers' initial values reach the device only through set_optimizer.
        built_executor.set_optimizer(built_optimizer)

        built_checkpointer = (
            checkpointer.construct(serialization_dir=serialization_dir) if checkpointer is not None else None
        )
        built_callbacks = [callback.construct(serialization_dir=serialization_dir) for callback in callbacks or []]
        if tensorboard_writer is not None:
            built_callbacks.append(tensorboard_writer.construct(serialization_dir=serialization_dir))
        built_batch_callbacks = [c.construct(serialization_dir=serialization_dir) for c in batch_callbacks or []]
        built_epoch_callbacks = [c.construct(serialization_dir=serialization_dir) for c in epoch_callbacks or []]

        return cls(
            model=model,
            executor=built_executor,
            data_loader=data_loader,
            optimizer=built_optimizer,
            patience=patience,
            validation_metric=validation_metric,
            validation_data_loader=validation_data_loader,
            num_epochs=num_epochs,
            serialization_dir=serialization_dir,
            checkpointer=built_checkpointer,
            learning_rate_scheduler=built_lr_scheduler,
            momentum_scheduler=built_momentum_scheduler,
            moving_average=built_moving_average,
            callbacks=built_callbacks,
            batch_callbacks=built_batch_callbacks,
            epoch_callbacks=built_epoch_callbacks,
            grad_clipping=grad_clipping,
            validation_interval=validation_interval,
            max_steps=max_steps,
            log_interval=log_interval,
            enable_default_callbacks=enable_default_callbacks,
        )

    # -- public state ----------------------------------------------------------------------

    @property
    def is_primary(self) -> bool:
        """Whether this process writes the run's files and prints: always in one process, rank 0 under torchrun."""
        return distributed.is_primary()

    @property
    def callbacks(self) -> List[TrainerCallback]:
        """The trainer callbacks, defaults included."""
        return self._callbacks

    @property
    def metric_tracker(self) -> MetricTracker:
        """The validation-score tracker."""
        return self._metric_tracker

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
        path = Path(self.serialization_dir) / BEST_WEIGHTS  # type: ignore[arg-type]
        return str(path) if path.exists() else None

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
        metrics: Optional[Dict[str, Any]] = None
        epoch: Optional[int] = None
        started = False
        self._training_start = time.monotonic()
        with InterruptListener() as interrupts:
            self._interrupts = interrupts
            try:
                self._restore_checkpoint()
                if self._status.training_finished:
                    logger.info("Nothing left to train in %s: %s.", self.serialization_dir, self._status.describe())
                    self._finalize_model()
                    return dict(self._status.metrics)
                started = True
                # Every length bucket is compiled now, so that a later bucket is not taken for a bad input.
                self.executor.compile_for(self.data_loader)
                if self.validation_executor is not None and self.validation_data_loader is not None:
                    self.validation_executor.compile_for(self.validation_data_loader)
                for callback in self._callbacks:
                    callback.on_start(self, is_primary=self.is_primary)
                for epoch_callback in self._epoch_callbacks:
                    epoch_callback(self, {}, -1, is_primary=self.is_primary)
                metrics, epoch = self._try_train()
                if interrupts.interrupted:
                    # The signal came as training ended; the stop is checkpointed, so -r only finishes the run.
                    raise TrainingInterrupted(
                        f"{interrupts.signal_name} arrived as training ended ({self._status.describe()}); the final "
                        f"checkpoint is saved in {self.serialization_dir}. `ipuflow train CONFIG -s "
                        f"{self.serialization_dir} -r` finishes the run (test evaluation and archive) without training."
                    )
                return metrics
            finally:
                self._interrupts = None
                if started:
                    for callback in self._callbacks:
                        callback.on_end(self, metrics=metrics, epoch=epoch, is_primary=self.is_primary)
                for batch_callback in self._batch_callbacks:
                    batch_callback.close()
                for epoch_callback in self._epoch_callbacks:
                    epoch_callback.close()

    def _try_train(self) -> Tuple[Dict[str, Any], Optional[int]]:
        metrics: Dict[str, Any] = self._best_metrics()
        last_epoch: Optional[int] = None
        self._apply_step_schedules()
        for epoch in range(self.epochs_completed, self._num_epochs):
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
        self._finalize_model()
        return metrics, last_epoch

    def _stop_reason(self) -> Optional[str]:
        """Why training ends at this point, if it does."""
        if self._metric_tracker.should_stop_early():
            return STOPPED_EARLY
        if self.control.should_stop:
            return STOPPED_BY_CALLBACK
        if self._reached_max_steps():
            return STOPPED_AT_MAX_STEPS
        if self.batches_in_epoch_completed == 0 and self.epochs_completed >= self._num_epochs:
            return STOPPED_AT_NUM_EPOCHS
        return None

    def _stop(self, reason: str, metrics: Dict[str, Any]) -> None:
        self._status = RunStatus(
            stopped=reason, epochs_completed=self.epochs_completed, optimizer_updates=self.optimizer_updates,
            num_epochs=self._num_epochs, max_steps=self._max_steps, metrics=dict(metrics),
        )
        logger.info("Training stopped: %s.", self._status.describe())

    def _reached_max_steps(self) -> bool:
        return self._max_steps is not None and self.optimizer_updates >= self._max_steps

    def _train_epoch(self, epoch: int) -> bool:
        """Run the epoch's remaining host calls; False if training stopped before its end."""
        loader = self.data_loader
        loader.set_epoch(epoch)
        start = self.batches_in_epoch_completed
        if start == 0:
            self._running_loss, self._running_calls = None, 0
        batches = loader.iter_from(start) if hasattr(loader, "iter_from") else self._skip(iter(loader), start)
        num_batches = self.num_batches_per_epoch
        executor = self.executor
        for batch_number, batch in enumerate(batches, start + 1):
            result = executor(batch)
            self.host_calls += 1
            self.optimizer_updates += result.optimizer_updates
            self.samples_seen += result.samples
            self.batches_in_epoch_completed = batch_number
            if result.loss is not None:
                loss = result.loss.detach()
                # In place on a buffer of our own: no per-call allocation and no device sync.
                if self._running_loss is None:
                    self._running_loss = loss.float().clone()
                else:
                    self._running_loss.add_(loss)
                self._running_calls += 1
            if self._moving_average is not None:
                executor.copy_weights_to_host()
                self._moving_average.apply(self.optimizer_updates)
            if self._outputs_cover_batch:
                self.model.update_metrics(result.outputs, batch)
            batch_metrics = None
            if self._crossed(self._log_interval, result.optimizer_updates):
                # Read before the schedules move on, so that `lr` is the one this call used.
                batch_metrics = self._read_training_metrics(result.loss)
            self._apply_step_schedules()

            if batch_metrics is not None:
                for callback in self._callbacks:
                    callback.on_log(self, batch_metrics, self.optimizer_updates, is_training=True, is_primary=self.is_primary)
            for callback in self._callbacks:
                callback.on_batch(self, batch, result.outputs, batch_metrics, epoch, batch_number, is_training=True,
                                  is_primary=self.is_primary)
            for batch_callback in self._batch_callbacks:
                batch_callback(self, batch, result.outputs, batch_metrics, epoch, batch_number, is_training=True,
                               is_primary=self.is_primary)

            agree_on_requests(self.control, self._interrupts)  # under torchrun every rank acts on any rank's request
            last_of_epoch = num_batches is not None and batch_number >= num_batches
            if not last_of_epoch and (self.control.should_stop or self._reached_max_steps()):
                return False  # the stop validates and saves (_stop_within_epoch)
            if not last_of_epoch:
                self._maybe_validate_within_epoch(epoch, result.optimizer_updates)
                if self._checkpointer is not None and (
                    self.control.should_save
                    or self._checkpointer.should_save(self.epochs_completed, self.batches_in_epoch_completed)
                ):
                    self._save_checkpoint()
                self.control.should_save = False
            if self._interrupts is not None and self._interrupts.interrupted:
                self._stop_for_signal(self._interrupts.signal_name or "a signal")
        return True

    @staticmethod
    def _skip(batches: Iterator[Any], count: int) -> Iterator[Any]:
        for index, batch in enumerate(batches):
            if index >= count:
                yield batch

    def _crossed(self, interval: Optional[int], updates_this_call: int) -> bool:
        """Whether the last call's updates reached a multiple of `interval` optimizer updates."""
        updates = self.optimizer_updates
        return interval is not None and updates // interval > (updates - updates_this_call) // interval

    def _maybe_validate_within_epoch(self, epoch: int, updates_this_call: int) -> None:
        crossed = self._crossed(self._validation_interval, updates_this_call)
        if (crossed or self.control.should_validate) and self.validation_data_loader is not None:
            self._check_loss_before_saving()
            validation_metrics = self._validate(epoch)
            if self._metric_tracker.is_best_so_far():
                self._best_epoch = epoch
                self._metric_tracker.best_epoch_metrics = dict(validation_metrics)
                self._mark_best()
                self._write_best_weights(just_checkpointed=False)
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

        for callback in self._callbacks:
            callback.on_epoch(self, metrics=metrics, epoch=epoch, is_primary=self.is_primary)
        for epoch_callback in self._epoch_callbacks:
            epoch_callback(self, metrics, epoch, is_primary=self.is_primary)

        self.epochs_completed += 1
        self.batches_in_epoch_completed = 0
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

    def _validate_for_metrics(self, epoch: int) -> Tuple[Optional[Dict[str, float]], bool]:
        """Validate if there is validation data; (metrics or None, whether these weights are the best)."""
        if self.validation_data_loader is None:
            self._best_epoch = epoch  # without validation the latest weights are the best
            return None, True
        validation_metrics = self._validate(epoch)
        is_best = self._metric_tracker.is_best_so_far()
        if is_best:
            self._best_epoch = epoch
            self._metric_tracker.best_epoch_metrics = dict(validation_metrics)
        return validation_metrics, is_best

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
        metrics.update(
            {"host_calls": self.host_calls, "optimizer_updates": self.optimizer_updates, "samples_seen": self.samples_seen}
        )
        metrics.update(self._best_metrics())
        if self.is_primary:
            write_json_atomically(Path(self.serialization_dir) / f"metrics_epoch_{epoch}.json", metrics)  # type: ignore[arg-type]
        return metrics

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
            self._mark_best()
        if self._checkpointer is not None and (
            reason is not None
            or self.control.should_save
            or self._checkpointer.should_save(self.epochs_completed, self.batches_in_epoch_completed)
        ):
            self._save_checkpoint(force=reason is not None)
        self.control.should_save = False
        if is_best:
            self._write_best_weights(just_checkpointed=True)

    def _training_seconds(self) -> float:
        """Seconds spent training this run, earlier processes of a resumed run included."""
        return self._training_seconds_before + time.monotonic() - self._training_start

    def _best_metrics(self) -> Dict[str, Any]:
        best: Dict[str, Any] = {}
        if self._best_epoch is not None:
            best["best_epoch"] = self._best_epoch
        for key, value in self._metric_tracker.best_epoch_metrics.items():
            best[f"best_validation_{key}"] = value
        return best

    def _mark_best(self) -> None:
        """The current weights are the best: remember where (the file follows; see `_write_best_weights`)."""
        self._best_position = (self.epochs_completed, self.batches_in_epoch_completed)
        self._best_sha256 = None

    def _write_best_weights(self, just_checkpointed: bool) -> None:
        """Write best.safetensors from the current weights (a hard link to the checkpoint written at
        this very position when it holds exactly them) and record its checksum."""
        position = (self.epochs_completed, self.batches_in_epoch_completed)
        best = Path(self.serialization_dir) / BEST_WEIGHTS  # type: ignore[arg-type]
        if (just_checkpointed and self._last_saved_position == position and self._last_checkpoint is not None
                and self._moving_average is None):
            if self.is_primary:
                link_atomically(self._last_checkpoint, best)
        else:
            self._save_best_weights()
        barrier()  # rank 0 has written them: every rank may read them
        self._best_sha256 = file_sha256(best)

    # -- loss reading (the only device syncs of the loop) ---------------------------------------

    def _read_running_loss(self) -> Optional[float]:
        if self._running_loss is None or self._running_calls == 0:
            return None
        return self._running_loss.item() / self._running_calls

    def _check_finite(self, value: Optional[float]) -> None:
        if value is not None and not math.isfinite(value):
            kept = f"the last good checkpoint ({self._last_checkpoint.name}) is kept" if self._last_checkpoint else "no checkpoint was saved"
            raise NonFiniteLossError(
                f"The training loss became {value} in epoch {self.epochs_completed} by optimizer update "
                f"{self.optimizer_updates}; training stopped and {kept}. Lower the learning rate, clip gradients "
                "(trainer.grad_norm) or check the data."
            )

    def _read_training_metrics(self, batch_loss: Optional[torch.Tensor]) -> Dict[str, float]:
        logs: Dict[str, float] = {}
        if self._running_loss is not None and batch_loss is not None:
            # One read for both values.
            total, last = torch.stack([self._running_loss, batch_loss.detach().float()]).tolist()
            self._check_finite(total)
            logs["loss"] = total / self._running_calls
            logs["batch_loss"] = last
        if self._outputs_cover_batch:
            logs.update(self.model.get_metrics(reset=False))
        if self.optimizer is not None:
            for index, group in enumerate(self.optimizer.param_groups):
                logs["lr" if index == 0 else f"lr_group{index}"] = float(group["lr"])
        return logs

    def _epoch_training_metrics(self, reset: bool = True) -> Dict[str, float]:
        metrics: Dict[str, float] = dict(self.model.get_metrics(reset=reset)) if self._outputs_cover_batch else {}
        loss = self._read_running_loss()
        self._check_finite(loss)
        if loss is not None:
            metrics["loss"] = loss
        return metrics

    def _check_loss_before_saving(self) -> None:
        self._check_finite(self._read_running_loss())

    # -- schedules -------------------------------------------------------------------------

    def _apply_step_schedules(self) -> None:
        """Set step-based values for the next update; send them to the device only if they changed."""
        if not self._schedulers:
            return
        before = _hyperparameters(self._schedulers)
        for scheduler in self._schedulers:
            scheduler.step_batch(self.optimizer_updates + 1)
        if _hyperparameters(self._schedulers) != before:
            self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]

    # -- validation ------------------------------------------------------------------------

    def _validate(self, epoch: int) -> Dict[str, float]:
        """Validation metrics under no-grad with the inference executor (moving average swapped in);
        also recorded in the metric tracker and reported to `on_evaluate`."""
        assert self.validation_executor is not None and self.validation_data_loader is not None
        if self.executor.is_attached:
            self.executor.detach()
        if self._moving_average is not None:
            self.executor.copy_weights_to_host()
            self._moving_average.assign_average_value()
            self.validation_executor.copy_weights_to_device()
        batch_numbers = itertools.count(1)
        # Validation resets the model's metrics; a validation within an epoch must not lose the
        # training metrics accumulated so far (output mode "all").
        training_metric_state = copy.deepcopy(self.model.metrics_state_dict()) if self._outputs_cover_batch else None

        def report_batch(outputs: Any, batch: Any) -> None:
            batch_number = next(batch_numbers)
            for callback in self._callbacks:
                callback.on_batch(self, batch, outputs, None, epoch, batch_number, is_training=False,
                                  is_primary=self.is_primary)
            for batch_callback in self._batch_callbacks:
                batch_callback(self, batch, outputs, None, epoch, batch_number, is_training=False,
                               is_primary=self.is_primary)

        try:
            with torch.no_grad():
                validation_metrics = evaluate(self.model, self.validation_executor, self.validation_data_loader,
                                              on_outputs=report_batch)
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
        for callback in self._callbacks:
            callback.on_evaluate(self, validation_metrics, epoch, self.optimizer_updates, is_primary=self.is_primary)
        return validation_metrics

    # -- weights and checkpoints -----------------------------------------------------------

    def _save_best_weights(self) -> None:
        self.executor.copy_weights_to_host()
        if self._moving_average is not None:
            self._moving_average.assign_average_value()
        try:
            state = self.model.state_dict()  # every rank: a sharded model gathers its weights (onto rank 0)
            if self.is_primary:
                save_weights(state, Path(self.serialization_dir) / BEST_WEIGHTS)  # type: ignore[arg-type]
        finally:
            if self._moving_average is not None:
                self._moving_average.restore()

    def _finalize_model(self) -> None:
        best = self.get_best_weights_path()
        if best is not None and self._best_sha256 is not None and file_sha256(best) != self._best_sha256:
            raise RuntimeError(
                f"{best} does not hold the best weights this run recorded (epoch {self._best_epoch}): its bytes "
                "differ from the checksum taken when they were written, and they cannot be rebuilt from the latest "
                "checkpoint. Restore the file from a backup, or start the run over with --force."
            )
        if best is not None:
            self.model.load_state_dict(load_weights(best))
            self.executor.copy_weights_to_device()
        elif self._moving_average is not None:
            self.executor.copy_weights_to_host()
            self._moving_average.assign_average_value()
            self.executor.copy_weights_to_device()

    @contextlib.contextmanager
    def get_checkpoint_state(self) -> Iterator[Optional[TrainerCheckpoint]]:
        """Raw weights (a moving average's shadows travel in the training state, so resuming is
        exact) and every piece of training state, as plain containers and tensors."""
        self.executor.copy_weights_to_host()
        training_state: Dict[str, Any] = {
            "version": TRAINING_STATE_VERSION,
            "epochs_completed": self.epochs_completed,
            "batches_in_epoch_completed": self.batches_in_epoch_completed,
            "host_calls": self.host_calls,
            "optimizer_updates": self.optimizer_updates,
            "samples_seen": self.samples_seen,
            "training_seconds": self._training_seconds(),
            "best_epoch": self._best_epoch,
            "best_position": list(self._best_position) if self._best_position is not None else None,
            "best_sha256": self._best_sha256,
            "running_loss": None if self._running_loss is None else self._running_loss.detach().cpu().clone(),
            "running_calls": self._running_calls,
            "executor": self.executor.state_dict(),
            "metric_tracker": self._metric_tracker.state_dict(),
            "learning_rate_scheduler": self._learning_rate_scheduler.state_dict() if self._learning_rate_scheduler else None,
            "momentum_scheduler": self._momentum_scheduler.state_dict() if self._momentum_scheduler else None,
            "moving_average": self._moving_average.state_dict() if self._moving_average else None,
            "callbacks": [callback.state_dict() for callback in self._callbacks],
            "model_metrics": self.model.metrics_state_dict(),
            "data_loader": self.data_loader.state_dict() if hasattr(self.data_loader, "state_dict") else None,
            "rng": {"python": _python_rng_state(), "numpy": _numpy_rng_state(), "torch": torch.get_rng_state()},
        }
        yield TrainerCheckpoint(self.model.state_dict(), training_state, self._status.to_dict())

    def _save_checkpoint(self, force: bool = False) -> None:
        """Checkpoint now, unless this position was just saved (`force`: save again, e.g. to record a stop)."""
        assert self._checkpointer is not None
        position = (self.epochs_completed, self.batches_in_epoch_completed)
        if self._last_saved_position == position and not force:
            return
        self._check_loss_before_saving()
        paths = self._checkpointer.save_checkpoint(self)
        self._last_saved_position = position
        if paths is not None:
            self._last_checkpoint = paths[0]
            for callback in self._callbacks:
                callback.on_save(self, paths, is_primary=self.is_primary)

    def _stop_for_signal(self, signal_name: str) -> None:
        if self._checkpointer is not None:
            self._save_checkpoint()
            where = f"A checkpoint was saved in {self.serialization_dir}"
        else:
            where = "No checkpointer is configured, so nothing was saved"
        raise TrainingInterrupted(
            f"Training was interrupted by {signal_name} after {self.optimizer_updates} optimizer updates "
            f"(epoch {self.epochs_completed}, {self.batches_in_epoch_completed} host calls into it). {where}; "
            f"resume with `ipuflow train CONFIG -s {self.serialization_dir} -r`."
        )

    def _restore_checkpoint(self) -> None:
        if self._checkpointer is None:
            return
        self._checkpointer.remove_incomplete_checkpoints()
        checkpoint = self._checkpointer.load_checkpoint()
        if checkpoint is None:
            return
        state = checkpoint.training_state
        if state.get("version") != TRAINING_STATE_VERSION:
            raise ConfigurationError(
                f"The checkpoint in {self.serialization_dir} has training-state version {state.get('version')!r}; "
                f"this ipuflow reads version {TRAINING_STATE_VERSION}"
            )
        try:
            self.model.load_state_dict(checkpoint.model_state)
            self.executor.copy_weights_to_device()
            self.executor.load_state_dict(state["executor"])
        except RuntimeError as error:
            raise ConfigurationError(
                f"Could not resume training from the checkpoint in {self.serialization_dir}: {error}. Did you mean "
                "to use another serialization directory?"
            ) from error
        self._metric_tracker.load_state_dict(state["metric_tracker"])
        for key, scheduler in (
            ("learning_rate_scheduler", self._learning_rate_scheduler),
            ("momentum_scheduler", self._momentum_scheduler),
        ):
            if scheduler is not None and state.get(key) is not None:
                scheduler.load_state_dict(state[key])
        if self._moving_average is not None and state.get("moving_average") is not None:
            self._moving_average.load_state_dict(state["moving_average"])
        for callback, callback_state in zip(self._callbacks, state.get("callbacks", [])):
            callback.load_state_dict(callback_state)
        self.model.load_metrics_state_dict(state.get("model_metrics", {}))
        if self._checkpointer is not None and state.get("checkpointer") is not None:
            self._checkpointer.load_state_dict(state["checkpointer"])
        if state.get("data_loader") is not None and hasattr(self.data_loader, "load_state_dict"):
            self.data_loader.load_state_dict(state["data_loader"])
        self.epochs_completed = state["epochs_completed"]
        self.batches_in_epoch_completed = state["batches_in_epoch_completed"]
        self.host_calls = state["host_calls"]
        self.optimizer_updates = state["optimizer_updates"]
        self.samples_seen = state["samples_seen"]
        self._training_seconds_before = float(state.get("training_seconds", 0.0))
        self._best_epoch = state["best_epoch"]
        self._best_position = tuple(state["best_position"]) if state.get("best_position") is not None else None  # type: ignore[assignment]
        self._best_sha256 = state.get("best_sha256")
        self._running_loss = state["running_loss"]
        if self._running_loss is not None:
            self._running_loss = self._running_loss.to(self.executor.device)
        self._running_calls = state["running_calls"]
        rng = state["rng"]
        _set_python_rng_state(rng["python"])
        _set_numpy_rng_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
        # The executor's RNG state (CUDA included) was restored by its load_state_dict above;
        # the CPU generator's state is the same snapshot either way.
        self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]
        self._last_saved_position = (self.epochs_completed, self.batches_in_epoch_completed)
        self._last_checkpoint = self._checkpointer.paths(*self._last_saved_position)[0]
        self._status = RunStatus.from_dict(checkpoint.run_status)
        logger.info(
            "Resumed from the checkpoint at epoch %d, host call %d (%d optimizer updates)",
            self.epochs_completed,
            self.batches_in_epoch_completed,
            self.optimizer_updates,
        )
        if self._status.training_finished and self._status.continues_with(self._num_epochs, self._max_steps):
            logger.info("The run had stopped at its %s limit, which is now higher: training continues.",
                        self._status.stopped)
            self._status = RunStatus()
        self._repair_best_weights()

    def _repair_best_weights(self) -> None:
        """Make best.safetensors hold the weights the checkpoint's state names as the best.

        When they were recorded at the checkpoint's own position (a crash may have come between the
        checkpoint and writing them) they are rebuilt from it; otherwise the file must match the
        checksum recorded when it was written, or it is the one a later validation wrote before the
        crash, which the resumed run writes again (the end of training checks it)."""
        if self._best_position is None:
            return
        best = Path(self.serialization_dir) / BEST_WEIGHTS  # type: ignore[arg-type]
        if self._best_position == self._last_saved_position:
            before = file_sha256(best) if best.is_file() else None
            self._write_best_weights(just_checkpointed=True)
            if before != self._best_sha256:
                logger.warning("%s did not hold the best weights recorded in the checkpoint (a crash before they "
                               "were written); rebuilt them from the checkpoint.", best)
        elif self._best_sha256 is not None and (not best.is_file() or file_sha256(best) != self._best_sha256):
            logger.info("%s differs from the best weights recorded in the checkpoint (epoch %s): it was written after "
                        "the checkpoint or damaged; the resumed run must write it again.", best, self._best_epoch)
