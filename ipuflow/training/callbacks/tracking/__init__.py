"""Experiment tracking: the `mlflow` and `wandb` callbacks (their packages imported only when used)."""

from ipuflow.training.callbacks.tracking.callbacks import MlflowCallback, TrackingCallback, WandbCallback

__all__ = ["MlflowCallback", "TrackingCallback", "WandbCallback"]
