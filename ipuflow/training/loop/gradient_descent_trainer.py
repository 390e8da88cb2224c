"""GradientDescentTrainer's loop, top to bottom: epochs of host calls through a step executor,
validation points, metrics files, checkpoints and exact resume (AllenNLP 2.10's loop, design.md §4).
The trainer is built in one place, its `from_partial_objects`. Its parts live in the rooms of
`training/` (docs/design.md): construction's steps, validation, training metrics, schedule stepping and
its read-only side (`TrainerReadout`) beside it in `loop/`, its state in `state/`, checkpoints and best
weights in `checkpoints/`, the events in `events/`."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch

from ipuflow.config import Lazy, validators
from ipuflow.data.loader import DataLoader
from ipuflow.distributed.agreement import agree_on_requests
from ipuflow.evaluation.example_scoring import ExampleScoring
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.storage import write_json_atomically
from ipuflow.training.checkpoints.best_weights import BestWeights
from ipuflow.training.callbacks.batch_callback import BatchCallback
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.callbacks.epoch_callback import EpochCallback
from ipuflow.training.callbacks.tensorboard import TensorBoardCallback
from ipuflow.training.checkpoints.checkpointer import Checkpointer, TrainerCheckpoint
from ipuflow.training.state.epoch_metrics import best_metrics, epoch_metrics
from ipuflow.training.events import TEST, CallbackList, EventDispatch, TrainerControl
from ipuflow.training.state.interruption import (
    InterruptListener, non_finite_loss_error, signal_as_training_ended, training_interrupted,
)
from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.optim.momentum_schedulers import MomentumScheduler
from ipuflow.training.optim.moving_average import MovingAverage
from ipuflow.training.optim.optimizers import Optimizer
from ipuflow.training.state.run_status import STOPPED_AT_NUM_EPOCHS, STOPPED_EARLY, RunStatus, stop_reason
from ipuflow.training.loop.executor_preparation import prepare_executors
from ipuflow.training.loop.readout import TrainerReadout
from ipuflow.training.loop.schedule_stepper import ScheduleStepper
from ipuflow.training.loop.trainer import Trainer
from ipuflow.training.checkpoints.trainer_checkpoints import TrainingCheckpoints, position_of, write_trainer_state
from ipuflow.training.loop.construction import (
    ALLENNLP_TRAINER_KEYS, all_callbacks, build_executor, build_in_directory, build_optimization, build_scheduler,
    check_trainer_arguments, executor_aliases,
)
from ipuflow.training.state.trainer_state import TrainerState, is_primary
from ipuflow.training.loop.training_metrics import TrainingMetrics
from ipuflow.training.loop.validation import ValidationExamples, Validation, ValidationLoaders, named_sets, score

logger = logging.getLogger(__name__)


@Trainer.register("gradient_descent", constructor="from_partial_objects")
class GradientDescentTrainer(TrainerReadout, CallbackList, Trainer):
    """Trains `model` with `executor` (which owns forward, backward and the optimizer step).

    Where training stands is `state` (a `TrainerState`); every event goes through one dispatch to the
    callbacks (docs/training.md). The running loss is summed on the device and read only every
    `log_interval` optimizer updates (and after each epoch's first host call, for the progress bar),
    before checkpoints and at epoch ends; a NaN/inf loss is left out of it and counted
    (`nonfinite_losses`), and `stop_after_nonfinite_losses` in a row stop training with
    `NonFiniteLossError`. `validation_interval` also validates every N optimizer updates; `max_steps`
    ends training after N (validating, writing metrics, best weights and a checkpoint as at an epoch
    end). The run's status (`RunStatus`) and which weights are the best are checkpointed, so a resumed
    run that had stopped stays stopped unless a limit it stopped at was raised, and resuming repairs
    `best.safetensors` after a crash between a checkpoint and writing it. Callbacks may read
    `checkpointer`, `learning_rate_scheduler`, `num_epochs` and `max_steps` (the configured limits)."""

    replaced_keys = ALLENNLP_TRAINER_KEYS

    def __init__(
        self, model: Model, executor: StepExecutor, data_loader: DataLoader,
        optimizer: Optional[torch.optim.Optimizer] = None, patience: Optional[int] = None,
        validation_metric: Union[str, List[str]] = "-loss", validation_data_loader: Optional[ValidationLoaders] = None,
        num_epochs: int = 20, serialization_dir: Optional[str] = None, checkpointer: Optional[Checkpointer] = None,
        learning_rate_scheduler: Optional[LearningRateScheduler] = None,
        momentum_scheduler: Optional[MomentumScheduler] = None, moving_average: Optional[MovingAverage] = None,
        callbacks: Optional[List[TrainerCallback]] = None, batch_callbacks: Optional[List[BatchCallback]] = None,
        epoch_callbacks: Optional[List[EpochCallback]] = None, grad_clipping: Optional[float] = None,
        validation_interval: Optional[int] = None, max_steps: Optional[int] = None, log_interval: int = 10,
        enable_default_callbacks: bool = True, validation_examples: Optional[ValidationExamples] = None,
        stop_after_nonfinite_losses: Optional[int] = 10,
    ) -> None:
        serialization_dir = serialization_dir or tempfile.mkdtemp(prefix="ipuflow-")
        super().__init__(serialization_dir)
        os.makedirs(serialization_dir, exist_ok=True)
        check_trainer_arguments(executor, patience, validation_data_loader, grad_clipping, num_epochs=num_epochs,
                                validation_interval=validation_interval, max_steps=max_steps, log_interval=log_interval)
        self.model, self.executor, self.optimizer = model, executor, optimizer
        # Several validation sets ({name: loader}): callbacks' `validation_data_loader` is the first one's.
        self.data_loader, self.validation_data_loader = data_loader, next(iter(named_sets(validation_data_loader).values()), None)
        self.num_epochs, self.max_steps = num_epochs, max_steps
        self._validation_interval, self._log_interval = validation_interval, log_interval
        self._metric_tracker = MetricTracker(validation_metric, patience)
        self.checkpointer, self._moving_average = checkpointer, moving_average
        self.learning_rate_scheduler = learning_rate_scheduler
        self._schedules = ScheduleStepper([learning_rate_scheduler, momentum_scheduler], executor, optimizer)
        plan = getattr(getattr(executor, "options", None), "plan", None)
        self._metrics = TrainingMetrics(model, optimizer, getattr(plan, "output_mode", None) == "all", self._stop_for_loss,
                                        validators.positive_int("stop_after_nonfinite_losses", stop_after_nonfinite_losses, optional=True))
        self.state, self.control, self._status = self._configured(TrainerState()), TrainerControl(), RunStatus()
        self._best = BestWeights(serialization_dir, model, executor, moving_average)
        self._interrupts: Optional[InterruptListener] = None
        self._clock_start, self._seconds_before = time.monotonic(), 0.0
        self._events = EventDispatch(self, all_callbacks(callbacks, batch_callbacks, epoch_callbacks,
                                                         enable_default_callbacks, serialization_dir))
        self._validation = None if validation_data_loader is None else Validation(
            model, executor, validation_data_loader, self._metric_tracker, moving_average,
            self._metrics.covers_batch, self._events, validation_examples)
        self.validation_executor = None if self._validation is None else self._validation.executor
        self._checkpoints = None if checkpointer is None else TrainingCheckpoints.for_trainer(
            checkpointer, model, executor, self._metric_tracker, self._metrics.loss, self._events.callbacks, data_loader,
            learning_rate_scheduler=learning_rate_scheduler, momentum_scheduler=momentum_scheduler,
            moving_average=moving_average, running_reg_loss=self._metrics.reg_loss)
        self._events.fire("on_init_end")

    @classmethod
    def from_partial_objects(
        cls, model: Model, serialization_dir: str, data_loader: DataLoader,
        validation_data_loader: Optional[ValidationLoaders] = None, optimizer: Lazy[Optimizer] = Lazy(Optimizer),
        patience: Optional[int] = None, validation_metric: Union[str, List[str]] = "-loss", num_epochs: int = 20,
        checkpointer: Optional[Lazy[Checkpointer]] = Lazy(Checkpointer), grad_norm: Union[float, bool] = False,
        grad_clipping: Optional[float] = None, learning_rate_scheduler: Optional[Lazy[LearningRateScheduler]] = None,
        momentum_scheduler: Optional[Lazy[MomentumScheduler]] = None,
        moving_average: Optional[Lazy[MovingAverage]] = None, callbacks: Optional[List[Lazy[TrainerCallback]]] = None,
        batch_callbacks: Optional[List[Lazy[BatchCallback]]] = None,
        epoch_callbacks: Optional[List[Lazy[EpochCallback]]] = None,
        tensorboard_writer: Optional[Lazy[TensorBoardCallback]] = None,
        num_gradient_accumulation_steps: Optional[int] = None, no_grad: Optional[List[str]] = None,
        executor: Lazy[StepExecutor] = Lazy(StepExecutor), validation_interval: Optional[int] = None,
        max_steps: Optional[int] = None, log_interval: int = 10, enable_default_callbacks: bool = True,
        validation_examples: Optional[ValidationExamples] = None, stop_after_nonfinite_losses: Optional[int] = 10,
    ) -> "GradientDescentTrainer":
        """Build every part in dependency order (docs/training.md); `model`, `serialization_dir`, the loaders
        and `validation_examples` (the postprocessor over the validation set) are injected. `grad_norm`,
        `grad_clipping`, `num_gradient_accumulation_steps` are the executor's `max_grad_norm`, `max_grad_value`,
        `gradient_accumulation`.

        grad_clipping: clamps each element of the reduced, unscaled gradient to ±v (the executor's max_grad_value).
        validation_interval: also validate every N optimizer updates.
        log_interval: optimizer updates between reads of the running loss and logged metrics.
        stop_after_nonfinite_losses: stop after this many host calls in a row had a NaN/inf loss (null: never).
        """
        built_optimizer, built_moving_average = build_optimization(model, optimizer, moving_average, no_grad)
        # The executor comes before the schedulers: the optimizer updates per epoch depend on its options.
        options = executor_aliases(executor.params.as_dict(), grad_norm, grad_clipping, num_gradient_accumulation_steps)
        built_executor, updates_per_epoch = build_executor(executor, model, built_optimizer, data_loader,
                                                           validation_data_loader, options)
        schedule = (built_optimizer, num_epochs, updates_per_epoch, validation_metric, max_steps)
        built_lr_scheduler = build_scheduler(learning_rate_scheduler, *schedule)
        built_momentum_scheduler = build_scheduler(momentum_scheduler, *schedule)
        built_executor.set_optimizer(built_optimizer)  # the schedulers' initial values reach the device only this way
        built_checkpointer = None if checkpointer is None else checkpointer.construct(serialization_dir=serialization_dir)
        return cls(
            model=model, executor=built_executor, data_loader=data_loader, optimizer=built_optimizer, patience=patience,
            validation_metric=validation_metric, validation_data_loader=validation_data_loader, num_epochs=num_epochs,
            serialization_dir=serialization_dir, checkpointer=built_checkpointer,
            learning_rate_scheduler=built_lr_scheduler, momentum_scheduler=built_momentum_scheduler,  # type: ignore[arg-type]
            moving_average=built_moving_average,
            callbacks=build_in_directory([*(callbacks or []), tensorboard_writer], serialization_dir),
            batch_callbacks=build_in_directory(batch_callbacks, serialization_dir),
            epoch_callbacks=build_in_directory(epoch_callbacks, serialization_dir), grad_clipping=grad_clipping,
            validation_interval=validation_interval, max_steps=max_steps, log_interval=log_interval,
            enable_default_callbacks=enable_default_callbacks, validation_examples=validation_examples,
            stop_after_nonfinite_losses=stop_after_nonfinite_losses)

    def _configured(self, state: TrainerState) -> TrainerState:
        calls = self.num_batches_per_epoch
        return state.configure(self.num_epochs, None if calls is None else calls * self.executor.updates_per_call,
                               self.max_steps, self._log_interval, self._validation_interval,
                               getattr(self.data_loader, "combined_batch_size", None))

    # -- public state (the read-only side is `TrainerReadout`) -------------------------------

    def record_run_status(self, status: RunStatus) -> None:
        """Adopt `status` (e.g. test set evaluated, archived) and record it with the latest checkpoint."""
        self._status = status
        if self.checkpointer is not None:
            self.checkpointer.update_run_status(status.to_dict())

    def evaluate_test_set(self, executor: StepExecutor, loader: Any, examples: Optional[ExampleScoring] = None) -> Dict[str, float]:
        """Score the model as it is (after `train()`: the best weights) on a test loader with an inference
        `executor` compiled for it, and `examples` if given; fires `on_prediction_step` and `on_predict`."""
        metrics = score(self.model, executor, loader, self._events, TEST, None, examples)
        self._events.fire("on_predict", metrics=metrics, split=TEST)
        return metrics

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
                prepare_executors(self.executor, self.data_loader, self.validation_executor,
                                  self.validation_data_loaders.values())
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
            write_trainer_state(self.state, Path(self.serialization_dir))  # type: ignore[arg-type]
            if interrupts.interrupted:  # as training ended: the stop is checkpointed, so -r only finishes the run
                raise signal_as_training_ended(str(interrupts.signal_name), self._status.describe(),
                                               str(self.serialization_dir))
            return metrics
        except BaseException as raised:
            error = raised
            raise
        finally:
            self._events.fire("on_train_end", metrics=metrics if error is None else None, epoch=epoch, error=error)

    def _try_train(self) -> Tuple[Dict[str, Any], Optional[int]]:
        metrics: Dict[str, Any] = best_metrics(self.state, self._metric_tracker)
        last_epoch: Optional[int] = None
        self._schedules.before_update(self.state.global_step + 1)
        for epoch in range(self.state.epochs_completed, self.num_epochs):
            epoch_start = time.monotonic()
            finished = self._train_epoch(epoch)
            last_epoch = epoch
            metrics = self._end_epoch(epoch, epoch_start) if finished else self._stop_within_epoch(epoch, epoch_start)
            if self._status.training_finished:
                break
        if not self._status.training_finished:  # no epoch was left to run
            self._stop(STOPPED_AT_NUM_EPOCHS, metrics)
            if self.checkpointer is not None:
                self._save_checkpoint(force=True)
        self._best.load_into_model(self.state)
        return metrics, last_epoch

    def _train_epoch(self, epoch: int) -> bool:
        """Run the epoch's remaining host calls; False if training stopped before its end."""
        loader, state, control = self.data_loader, self.state, self.control
        loader.set_epoch(epoch)
        start = state.batches_in_epoch_completed
        if start == 0:
            self._metrics.reset()
        num_batches = self.num_batches_per_epoch
        self._events.fire("on_epoch_begin", epoch=epoch)
        for batch_number, batch in enumerate(loader.iter_from(start), start + 1):
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
                if self.checkpointer is not None and (
                        control.should_save or self.checkpointer.should_save(*position_of(state))):
                    self._save_checkpoint()
                control.should_save = False
            if self._interrupts is not None and self._interrupts.interrupted:
                self._stop_for_signal(self._interrupts.signal_name or "a signal")
        return True

    def _host_call(self, batch: Any, batch_number: int, epoch: int, num_batches: Optional[int]) -> int:
        """One host call and its bookkeeping, `on_step_end` and `on_log`; the optimizer updates it made."""
        state, control = self.state, self.control
        result = self.executor(batch)
        state.host_calls += 1
        state.global_step += result.optimizer_updates
        state.samples_seen += result.samples
        state.batches_in_epoch_completed = batch_number
        state.epoch = state.epochs_completed + (batch_number / num_batches if num_batches else 0.0)
        self._metrics.add(result.loss, result.outputs)
        self._metrics.count_tokens(state, batch, result.samples)
        if self._moving_average is not None:
            self.executor.copy_weights_to_host()
            self._moving_average.apply(state.global_step)
        if self._metrics.covers_batch:
            self.model.update_metrics(result.outputs, batch)
        logs = None
        if control.should_log or self._crossed(self._log_interval, result.optimizer_updates):
            logs = self._metrics.logs(result.loss)
        # Read once per epoch for on_step_end alone (no logging point): the progress bar shows a loss from the start.
        self._events.fire("on_step_end", epoch=epoch, batch_number=batch_number, batch=batch, outputs=result.outputs,
                          logs=self._metrics.logs(result.loss) if logs is None and batch_number == 1 else logs)
        if logs is None and control.should_log:  # asked for during on_step_end
            logs = self._metrics.logs(result.loss)
        if logs is not None:
            control.should_log = False
            state.log_history.append({**logs, "epoch": state.epoch, "step": state.global_step})
            self._events.fire("on_log", epoch=epoch, batch_number=batch_number, logs=logs)
        # After the logs: their `lr` is the one this call used.
        self._schedules.before_update(state.global_step + 1)
        return result.optimizer_updates

    def _crossed(self, interval: Optional[int], updates_this_call: int) -> bool:
        """Whether the last call's updates reached a multiple of `interval` optimizer updates."""
        updates = self.state.global_step
        return interval is not None and updates // interval > (updates - updates_this_call) // interval

    # -- validation points -----------------------------------------------------------------

    def _maybe_validate_within_epoch(self, epoch: int, updates_this_call: int) -> None:
        crossed = self._crossed(self._validation_interval, updates_this_call)
        if (crossed or self.control.should_validate) and self._validation is not None:
            self._metrics.check_running_loss()
            self._validation.validate(epoch, self.state)
            if self._metric_tracker.is_best_so_far():
                self._best.write(self.state, checkpoint_here=None)
        self.control.should_validate = False

    def _end_epoch(self, epoch: int, epoch_start: float) -> Dict[str, Any]:
        """Validation, the metrics file, epoch-based schedules, callbacks, checkpoint and best weights."""
        training_metrics = self._metrics.epoch_metrics()
        validation_metrics, is_best = self._validate_for_metrics(epoch)
        # The end-of-epoch validation answers a request made on the epoch's last call.
        self.control.should_validate = False
        metrics = self._write_epoch_metrics(epoch, epoch_start, training_metrics, validation_metrics)
        self._schedules.after_epoch(
            None if validation_metrics is None else self._metric_tracker.combined_score(validation_metrics))
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
        training_metrics = self._metrics.epoch_metrics(reset=False)
        validation_metrics, is_best = self._validate_for_metrics(epoch)
        metrics = self._write_epoch_metrics(epoch, epoch_start, training_metrics, validation_metrics)
        self._save_position(metrics, is_best)
        return metrics

    def _validate_for_metrics(self, epoch: int) -> Tuple[Optional[Dict[str, float]], bool]:
        """Validate if there is validation data; (metrics or None, whether these weights are the best)."""
        if self._validation is None:
            self.state.best_epoch = epoch  # without validation the latest weights are the best
            return None, True
        return self._validation.validate(epoch, self.state), self._metric_tracker.is_best_so_far()

    def _write_epoch_metrics(self, epoch: int, epoch_start: float, training_metrics: Dict[str, float],
                             validation_metrics: Optional[Dict[str, float]]) -> Dict[str, Any]:
        self.state.training_seconds = self._seconds_before + time.monotonic() - self._clock_start
        metrics = epoch_metrics(epoch, self.state.training_seconds, time.monotonic() - epoch_start, training_metrics,
                                validation_metrics, self.state, self._metric_tracker)
        if is_primary():
            write_json_atomically(Path(self.serialization_dir) / f"metrics_epoch_{epoch}.json", metrics)  # type: ignore[arg-type]
        return metrics

    def _save_position(self, metrics: Dict[str, Any], is_best: bool) -> None:
        """After a validation point that ends an epoch or training: decide whether training stops,
        checkpoint (always when it stops, with the stop and the best weights' position in the
        state), then write the best weights."""
        state = self.state
        reason = stop_reason(self._metric_tracker.should_stop_early(), self.control.should_stop,
                             self._reached_max_steps(),
                             state.batches_in_epoch_completed == 0 and state.epochs_completed >= self.num_epochs)
        if reason is not None:
            if reason == STOPPED_EARLY:
                logger.info("Ran out of patience; stopping training.")
            self._stop(reason, metrics)
        if is_best:
            BestWeights.mark(state, state.best_epoch)  # type: ignore[arg-type]
        if self.checkpointer is not None and (
                reason is not None or self.control.should_save or self.checkpointer.should_save(*position_of(state))):
            self._save_checkpoint(force=reason is not None)
        self.control.should_save = False
        if is_best:
            checkpoints = self._checkpoints
            here = checkpoints.last_checkpoint if checkpoints is not None and checkpoints.is_saved(state) else None
            digest = None if here is None else checkpoints.checkpointer.written_sha256(here)  # type: ignore[union-attr]
            self._best.write(state, checkpoint_here=here, checkpoint_sha256=digest)

    # -- stopping and checkpoints ------------------------------------------------------------

    def _reached_max_steps(self) -> bool:
        return self.max_steps is not None and self.state.global_step >= self.max_steps

    def _stop(self, reason: str, metrics: Dict[str, Any]) -> None:
        self._status = RunStatus.stopped_now(reason, self.state.epochs_completed, self.state.global_step,
                                             self.num_epochs, self.max_steps, metrics, self._metric_tracker.patience)

    def _stop_for_signal(self, signal_name: str) -> None:
        if self.checkpointer is not None:
            self._save_checkpoint()
        raise training_interrupted(signal_name, self.state.global_step, self.state.epochs_completed,
                                   self.state.batches_in_epoch_completed, self.checkpointer is not None,
                                   str(self.serialization_dir))

    @contextlib.contextmanager
    def get_checkpoint_state(self) -> Iterator[Optional[TrainerCheckpoint]]:
        """The weights, the `TrainerState` and every stateful part (see `TrainingCheckpoints.contents`)."""
        self.state.training_seconds = self._seconds_before + time.monotonic() - self._clock_start
        yield None if self._checkpoints is None else self._checkpoints.contents(self.state, self._status)

    def _save_checkpoint(self, force: bool = False) -> None:
        """Checkpoint now, unless this position was just saved (`force`: save again, e.g. to record a stop)."""
        assert self._checkpoints is not None
        if self._checkpoints.is_saved(self.state) and not force:
            return
        self._metrics.check_running_loss()
        paths = self._checkpoints.save(self, self.state)
        if paths is not None:
            self._events.fire("on_save", paths=paths)

    def _restore_checkpoint(self) -> None:
        restored = self._checkpoints.restore() if self._checkpoints is not None else None
        if restored is None:
            return
        state, checkpoint, weights = restored
        self.state = self._configured(state)
        self._seconds_before = state.training_seconds
        self.executor.set_optimizer(self.optimizer)  # type: ignore[arg-type]
        logger.info("Resumed from the checkpoint at epoch %d, host call %d (%d optimizer updates)",
                    state.epochs_completed, state.batches_in_epoch_completed, state.global_step)
        recorded = RunStatus.from_dict(checkpoint.run_status)
        self._status = recorded.resumed_with(self.num_epochs, self.max_steps, self._metric_tracker.patience)
        self._best.repair(self.state, checkpoint.position, weights)
        if not self._status.training_finished:
            self._schedules.resume(self.state.global_step + 1, limits_raised=recorded.training_finished)

    def _stop_for_loss(self, in_a_row: int) -> None:
        last = self._checkpoints.last_checkpoint if self._checkpoints is not None else None
        raise non_finite_loss_error(in_a_row, self.state.epochs_completed, self.state.global_step,
                                    last.name if last is not None else None)
