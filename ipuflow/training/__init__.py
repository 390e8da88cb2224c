"""Training: the trainer, optimizers, schedulers, moving averages, checkpointer and callbacks.

Importing the package registers every built-in under its config name. The package is a few rooms,
lowest first (docs/design.md, section 2): `state/` (where training stands), `optim/` (optimizers and
schedules), `checkpoints/` (what a checkpoint holds), `events/` (events, control and the
`TrainerView` callbacks see), `callbacks/`, and `loop/` (the trainer and its construction).
"""

from ipuflow.training.callbacks import (
    BatchCallback,
    ConsoleMetricsCallback,
    EarlyStoppingCallback,
    EpochCallback,
    ProgressCallback,
    TensorBoardCallback,
    TensorBoardMemoryUsage,
    TrackEpochCallback,
    TrainerCallback,
    TrainerControl,
)
from ipuflow.plugins import keep_moved_modules_importable
from ipuflow.training.checkpoints.checkpointer import Checkpointer, TrainerCheckpoint
from ipuflow.training.events import TrainerEvent
from ipuflow.training.loop.gradient_descent_trainer import GradientDescentTrainer
from ipuflow.training.loop.trainer import Trainer
from ipuflow.training.optim.lamb import Lamb
from ipuflow.training.optim.lr_schedulers import LearningRateScheduler
from ipuflow.training.optim.momentum_schedulers import InvertedTriangular, MomentumScheduler
from ipuflow.training.optim.moving_average import ExponentialMovingAverage, MovingAverage
from ipuflow.training.optim.optimizers import Optimizer, make_parameter_groups
from ipuflow.training.state.interruption import NonFiniteLossError, TrainingInterrupted
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.state.trainer_state import TrainerState

# Module paths from before the rooms (issue 33), kept for plugins and scripts that import them.
MOVED_MODULES = {
    "trainer_state": "ipuflow.training.state.trainer_state",
    "run_status": "ipuflow.training.state.run_status",
    "interruption": "ipuflow.training.state.interruption",
    "metric_tracker": "ipuflow.training.state.metric_tracker",
    "running_loss": "ipuflow.training.state.running_loss",
    "rng_state": "ipuflow.training.state.rng_state",
    "epoch_metrics": "ipuflow.training.state.epoch_metrics",
    "optimizers": "ipuflow.training.optim.optimizers",
    "lamb": "ipuflow.training.optim.lamb",
    "regularization": "ipuflow.training.optim.regularization",
    "moving_average": "ipuflow.training.optim.moving_average",
    "scheduler": "ipuflow.training.optim.scheduler",
    "momentum_schedulers": "ipuflow.training.optim.momentum_schedulers",
    "lr_schedulers": "ipuflow.training.optim.lr_schedulers",
    **{f"lr_schedulers.{name}": f"ipuflow.training.optim.lr_schedulers.{name}"
       for name in ("combined", "cosine", "learning_rate_scheduler", "torch_schedulers", "update_schedules", "warmup")},
    "checkpointer": "ipuflow.training.checkpoints.checkpointer",
    "checkpoint_state": "ipuflow.training.checkpoints.training_state",
    "trainer_checkpoints": "ipuflow.training.checkpoints.trainer_checkpoints",
    "best_weights": "ipuflow.training.checkpoints.best_weights",
    "trainer": "ipuflow.training.loop.trainer",
    "gradient_descent_trainer": "ipuflow.training.loop.gradient_descent_trainer",
    "trainer_construction": "ipuflow.training.loop.construction",
    "validation": "ipuflow.training.loop.validation",
    "schedule_stepper": "ipuflow.training.loop.schedule_stepper",
    "training_metrics": "ipuflow.training.loop.training_metrics",
}
"""{old name under ipuflow.training: its module now}; each old name is the same module object."""
keep_moved_modules_importable(__name__, MOVED_MODULES)

__all__ = [
    "BatchCallback",
    "Checkpointer",
    "ConsoleMetricsCallback",
    "EarlyStoppingCallback",
    "EpochCallback",
    "ExponentialMovingAverage",
    "GradientDescentTrainer",
    "InvertedTriangular",
    "Lamb",
    "LearningRateScheduler",
    "MetricTracker",
    "MomentumScheduler",
    "MovingAverage",
    "NonFiniteLossError",
    "Optimizer",
    "ProgressCallback",
    "TensorBoardCallback",
    "TensorBoardMemoryUsage",
    "TrackEpochCallback",
    "Trainer",
    "TrainerCallback",
    "TrainerCheckpoint",
    "TrainerControl",
    "TrainerEvent",
    "TrainerState",
    "TrainingInterrupted",
    "make_parameter_groups",
]
