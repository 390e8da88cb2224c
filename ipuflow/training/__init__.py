"""Training: the trainer, optimizers, schedulers, moving averages, checkpointer and callbacks.

Importing the package registers every built-in under its config name.
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
from ipuflow.training.checkpoints.checkpointer import Checkpointer, TrainerCheckpoint
from ipuflow.training.events import TrainerEvent
from ipuflow.training.loop.gradient_descent_trainer import GradientDescentTrainer
from ipuflow.training.state.interruption import NonFiniteLossError, TrainingInterrupted
from ipuflow.training.optim.lamb import Lamb
from ipuflow.training.optim.lr_schedulers import LearningRateScheduler
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.optim.momentum_schedulers import InvertedTriangular, MomentumScheduler
from ipuflow.training.optim.moving_average import ExponentialMovingAverage, MovingAverage
from ipuflow.training.optim.optimizers import Optimizer, make_parameter_groups
from ipuflow.training.loop.trainer import Trainer
from ipuflow.training.state.trainer_state import TrainerState

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
