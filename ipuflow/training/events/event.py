"""The one object every trainer event carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

from ipuflow.training.events.control import TrainerControl
from ipuflow.training.state.trainer_state import TrainerState, is_primary

if TYPE_CHECKING:
    from pathlib import Path

    from ipuflow.training.events.view import TrainerView

EVENTS = (
    "on_init_end",
    "on_train_begin",
    "on_epoch_begin",
    "on_step_begin",
    "on_substep_end",
    "on_pre_optimizer_step",
    "on_optimizer_step",
    "on_step_end",
    "on_log",
    "on_prediction_step",
    "on_evaluate",
    "on_save",
    "on_epoch_end",
    "on_train_end",
    "on_predict",
)
"""Every event the trainer fires, in the order of a run (docs/training.md says when)."""

TRAIN, VALIDATION, TEST = "train", "validation", "test"


@dataclass
class TrainerEvent:
    """What happened (`name`), to which trainer, its `state` and `control`, and the payload.

    Payload fields are None where the event has none: `epoch` (0-based) and `batch_number`
    (1-based host call of the epoch, or batch of the validation/test pass); `split` ("train",
    "validation" or "test") of the batch; `batch` and `outputs` (on the device) of a step;
    `logs` (running training metrics read at a logging point: `loss`, `batch_loss`, `lr`...);
    `metrics` (a validation's or test pass's metrics, or the epoch's metrics dict at
    `on_epoch_end` and `on_train_end`); `paths` (model and training state files of a checkpoint);
    `error` (what ended training, at `on_train_end`).
    """

    name: str
    trainer: "TrainerView"
    state: TrainerState
    control: TrainerControl
    epoch: Optional[int] = None
    batch_number: Optional[int] = None
    split: str = TRAIN
    batch: Optional[Mapping[str, Any]] = None
    outputs: Optional[Mapping[str, Any]] = None
    logs: Optional[Dict[str, float]] = None
    metrics: Optional[Dict[str, Any]] = None
    paths: Optional[Tuple["Path", "Path"]] = None
    error: Optional[BaseException] = None

    @property
    def is_training(self) -> bool:
        """Whether the batch is a training one."""
        return self.split == TRAIN

    @property
    def is_primary(self) -> bool:
        """Whether this process writes files and logs (always, outside distributed runs)."""
        return is_primary()
