"""The registrable base of learning-rate schedulers."""

from __future__ import annotations

import torch

from ipuflow.config import Registrable
from ipuflow.training.scheduler import Scheduler


class LearningRateScheduler(Scheduler, Registrable):
    """A schedule for the optimizer's ``lr``; `optimizer`, `num_epochs` and `num_steps_per_epoch`
    (counted in optimizer updates) are injected by the trainer. There is no default type."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, "lr", last_epoch)


def require_steps(name: str, num_epochs: object, num_steps_per_epoch: object) -> None:
    """Raise a `ConfigurationError` when a step-based schedule lacks its injected lengths."""
    from ipuflow.config import ConfigurationError

    if num_epochs is None or num_steps_per_epoch is None:
        raise ConfigurationError(
            f"{name} needs num_epochs and num_steps_per_epoch; the trainer injects them when the data loader has "
            f"a length (found num_epochs={num_epochs}, num_steps_per_epoch={num_steps_per_epoch}).",
            key="",
        )
