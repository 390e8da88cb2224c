"""What the trainer reports about training between validations: the running loss (summed on the
device), the model's own metrics when the executor returns every micro-batch's outputs, and the
learning rates."""

from __future__ import annotations

from typing import Callable, Dict, Optional

import torch

from ipuflow.models.model import Model
from ipuflow.training.running_loss import RunningLoss


class TrainingMetrics:
    """Reads the running training metrics; the only device syncs of the loop are its reads. Every
    loss read goes through `check_loss` (the trainer's NaN/inf guard)."""

    def __init__(self, model: Model, optimizer: Optional[torch.optim.Optimizer], covers_batch: bool,
                 check_loss: Callable[[Optional[float]], None]) -> None:
        self.loss = RunningLoss()
        self.check_loss = check_loss
        self._model = model
        self._optimizer = optimizer
        self.covers_batch = covers_batch

    def logs(self, batch_loss: Optional[torch.Tensor]) -> Dict[str, float]:
        """At a logging point: `loss` (the mean so far) and `batch_loss` (the last call's) in one read,
        the model's metrics so far (not reset), and `lr` (`lr_group<i>` for later parameter groups)."""
        logs: Dict[str, float] = {}
        if self.loss.started and batch_loss is not None:
            logs["loss"], logs["batch_loss"] = self.loss.mean_and_last(batch_loss)
            self.check_loss(logs["loss"])
        if self.covers_batch:
            logs.update(self._model.get_metrics(reset=False))
        if self._optimizer is not None:
            for index, group in enumerate(self._optimizer.param_groups):
                logs["lr" if index == 0 else f"lr_group{index}"] = float(group["lr"])
        return logs

    def check_running_loss(self) -> None:
        """Read the running loss (a sync) and check it, e.g. before a checkpoint keeps these weights."""
        self.check_loss(self.loss.mean())

    def epoch_metrics(self, reset: bool = True) -> Dict[str, float]:
        """The epoch's training metrics: the model's (reset when `reset`) and the mean loss."""
        metrics: Dict[str, float] = dict(self._model.get_metrics(reset=reset)) if self.covers_batch else {}
        loss = self.loss.mean()
        self.check_loss(loss)
        if loss is not None:
            metrics["loss"] = loss
        return metrics
