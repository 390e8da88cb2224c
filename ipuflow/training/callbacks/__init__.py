"""Trainer callbacks; importing the package registers every built-in."""

from ipuflow.training.callbacks.callback import TrainerCallback, TrainerControl, TrainerEvent
from ipuflow.training.callbacks.batch_callback import BatchCallback
from ipuflow.training.callbacks.epoch_callback import EpochCallback
from ipuflow.training.callbacks.console_metrics import ConsoleMetricsCallback
from ipuflow.training.callbacks.early_stopping import EarlyStoppingCallback
from ipuflow.training.callbacks.memory_usage import TensorBoardMemoryUsage
from ipuflow.training.callbacks.optuna_pruning import OptunaPruningCallback
from ipuflow.training.callbacks.progress import ProgressCallback
from ipuflow.training.callbacks.tensorboard import TensorBoardCallback
from ipuflow.training.callbacks.track_epoch import TrackEpochCallback

__all__ = [
    "TrainerCallback",
    "TrainerControl",
    "TrainerEvent",
    "BatchCallback",
    "EpochCallback",
    "ConsoleMetricsCallback",
    "EarlyStoppingCallback",
    "TensorBoardMemoryUsage",
    "OptunaPruningCallback",
    "ProgressCallback",
    "TensorBoardCallback",
    "TrackEpochCallback",
]
