"""What a callback may read of the trainer it is attached to: `TrainerView`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Protocol, Tuple

if TYPE_CHECKING:
    import torch

    from ipuflow.data.loader import DataLoader
    from ipuflow.execution.executor import StepExecutor
    from ipuflow.models.model import Model
    from ipuflow.training.checkpoints.checkpointer import Checkpointer
    from ipuflow.training.events.control import TrainerControl
    from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler
    from ipuflow.training.state.metric_tracker import MetricTracker
    from ipuflow.training.state.trainer_state import TrainerState


class TrainerView(Protocol):
    """The trainer as callbacks see it (`event.trainer`, `callback.trainer`): its parts, its configured
    limits and where it stands. Callbacks read these and steer through `control`; they never need the
    trainer class, so the events and callbacks sit below the loop that fires them."""

    model: "Model"
    executor: "StepExecutor"
    optimizer: Optional["torch.optim.Optimizer"]
    data_loader: "DataLoader"
    validation_data_loader: Optional["DataLoader"]
    checkpointer: Optional["Checkpointer"]
    learning_rate_scheduler: Optional["LearningRateScheduler"]
    num_epochs: int
    max_steps: Optional[int]
    serialization_dir: Optional[str]
    state: "TrainerState"
    control: "TrainerControl"

    @property
    def metric_tracker(self) -> "MetricTracker":
        """The validation-score tracker."""

    @property
    def num_batches_per_epoch(self) -> Optional[int]:
        """Host calls per training epoch (None if the loader has no length)."""

    @property
    def num_validation_batches(self) -> Optional[int]:
        """Host calls per validation (None without validation data or a length)."""

    @property
    def computes_training_metrics(self) -> bool:
        """Whether the model's metrics are updated on training batches."""

    @property
    def optimizer_updates(self) -> int:
        """`state.global_step`."""


class Listener(Protocol):
    """What the dispatch needs of a callback: the `trainer` it sets, the events it listens to, and
    its state, which the trainer's checkpoints hold."""

    trainer: Optional[TrainerView]

    def listeners(self) -> List[Tuple[str, Callable[[Any], None]]]:
        """(event name, method to call with the event) for every event the callback listens to."""

    def state_dict(self) -> Any:
        """State to checkpoint (plain values)."""

    def load_state_dict(self, state_dict: Any) -> None:
        """Restore what `state_dict` returned."""
