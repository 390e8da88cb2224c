"""The trainer's side of checkpoints: what one holds (raw weights, the `TrainerState`, every
stateful part and the run status), saving at most once per position with ``trainer_state.json``
beside it, and restoring the latest."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ipuflow.config import ConfigurationError
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.training.checkpoints.checkpointer import Checkpointer, CheckpointSource, TrainerCheckpoint
from ipuflow.training.checkpoints.training_state import (
    Stateful, StatefulPart, collect_training_state, restore_training_state,
)
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.state.rng_state import HostRngState
from ipuflow.training.state.run_status import RunStatus
from ipuflow.training.state.running_loss import RunningLoss
from ipuflow.training.state.trainer_state import TRAINER_STATE_NAME, TrainerState, is_primary


def position_of(state: TrainerState) -> Tuple[int, int]:
    """(epochs completed, host calls into the current epoch): what names a checkpoint's files."""
    return state.epochs_completed, state.batches_in_epoch_completed


def stateful_parts(executor: StepExecutor, metric_tracker: MetricTracker, running_loss: RunningLoss,
                   callbacks: Sequence[Stateful], model: Model, optional: Dict[str, Any]) -> List[StatefulPart]:
    """Every piece of a trainer's state besides the `TrainerState`, in restore order: `callbacks`
    (the dispatch's list, so that callbacks added later count) by position, and the `optional`
    parts that are not None (schedulers, moving average, a loader with a `state_dict`)."""

    def load_callbacks(states: List[Dict[str, Any]]) -> None:
        for callback, state in zip(callbacks, states):
            callback.load_state_dict(state)

    parts = [StatefulPart("executor", executor.state_dict, executor.load_state_dict),
             StatefulPart("metric_tracker", metric_tracker.state_dict, metric_tracker.load_state_dict),
             StatefulPart("running_loss", running_loss.state_dict,
                          lambda state: running_loss.load_state_dict(state, executor.device)),
             StatefulPart("callbacks", lambda: [callback.state_dict() for callback in callbacks], load_callbacks),
             StatefulPart("model_metrics", model.metrics_state_dict, model.load_metrics_state_dict)]
    parts += [StatefulPart(name, part.state_dict, part.load_state_dict)
              for name, part in optional.items() if part is not None]
    # Last: the executor's state restored the CPU generator too, from the same snapshot.
    rng = HostRngState()
    return parts + [StatefulPart("rng", rng.state_dict, rng.load_state_dict)]


class TrainingCheckpoints:
    """Checkpoints of one trainer through its `checkpointer`. `parts` lists the stateful parts
    (besides the `TrainerState`) in restore order. `last_saved_position` and `last_checkpoint`
    (its weights file) say what was saved last, by this process or the one resumed from."""

    def __init__(self, checkpointer: Checkpointer, model: Model, executor: StepExecutor,
                 parts: List[StatefulPart]) -> None:
        self.checkpointer = checkpointer
        self._model = model
        self._executor = executor
        self._parts = parts
        self.last_saved_position: Optional[Tuple[int, int]] = None
        self.last_checkpoint: Optional[Path] = None

    def contents(self, state: TrainerState, status: RunStatus) -> TrainerCheckpoint:
        """Raw weights (a moving average's shadows travel in the training state, so resuming is
        exact), the state and every part, as plain containers and tensors."""
        self._executor.copy_weights_to_host()
        training_state = collect_training_state(state, self._parts)
        return TrainerCheckpoint(self._model.state_dict(), training_state, position_of(state), status.to_dict())

    def is_saved(self, state: TrainerState) -> bool:
        """Whether a checkpoint was saved at the state's position."""
        return self.last_saved_position == position_of(state)

    def save(self, trainer: CheckpointSource, state: TrainerState) -> Optional[Tuple[Path, Path]]:
        """Save `trainer`'s checkpoint now, then `trainer_state.json`; the paths written."""
        paths = self.checkpointer.save_checkpoint(trainer)
        self.last_saved_position = position_of(state)
        if paths is not None:
            self.last_checkpoint = paths[0]
            write_trainer_state(state, self.checkpointer.serialization_dir)
        return paths

    def restore(self) -> Optional[Tuple[TrainerState, TrainerCheckpoint, Path]]:
        """Load the latest readable checkpoint into the model, the executor and every part; its
        `TrainerState`, the checkpoint and its weights file (None when there is none)."""
        self.checkpointer.remove_incomplete_checkpoints()
        checkpoint = self.checkpointer.load_checkpoint()
        if checkpoint is None:
            return None
        where = str(self.checkpointer.serialization_dir)
        try:
            self._model.load_state_dict(checkpoint.model_state)
            self._executor.copy_weights_to_device()
            state = restore_training_state(checkpoint.training_state, self._parts, where)
        except RuntimeError as error:
            raise ConfigurationError(
                f"Could not resume training from the checkpoint in {where}: {error}. Did you mean to use another "
                "serialization directory?"
            ) from error
        self.last_saved_position = checkpoint.position
        self.last_checkpoint = self.checkpointer.paths(*checkpoint.position)[0]
        return state, checkpoint, self.last_checkpoint


def write_trainer_state(state: TrainerState, serialization_dir: Path) -> None:
    """`trainer_state.json` in the serialization directory (by the primary process only)."""
    if is_primary():
        state.save(Path(serialization_dir) / TRAINER_STATE_NAME)
