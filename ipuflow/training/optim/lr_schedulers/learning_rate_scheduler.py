"""The registrable base of learning-rate schedulers."""

from __future__ import annotations

from typing import Optional

import torch

from ipuflow.config import Registrable
from ipuflow.training.optim.scheduler import Scheduler


class LearningRateScheduler(Scheduler, Registrable):
    """A schedule for the optimizer's ``lr``; `optimizer`, `num_epochs`, `num_steps_per_epoch` (counted in
    optimizer updates) and `max_steps` are injected by the trainer. A step-based schedule spans the run's
    updates: `max_steps` when set and reached first, else num_epochs × num_steps_per_epoch. There is no
    default type."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, "lr", last_epoch)


def require_steps(name: str, num_epochs: Optional[int], num_steps_per_epoch: Optional[int],
                  max_steps: Optional[int] = None) -> int:
    """The run's optimizer updates (see `run_updates`), or a `ConfigurationError` when a step-based
    schedule lacks its injected lengths."""
    from ipuflow.config import ConfigurationError
    from ipuflow.training.optim.lr_schedulers.warmup import run_updates

    updates = run_updates(num_epochs, num_steps_per_epoch, max_steps)
    if updates is None:
        raise ConfigurationError(
            f"{name} needs num_epochs and num_steps_per_epoch, or max_steps; the trainer injects them when the data "
            f"loader has a length or trainer.max_steps is set (found num_epochs={num_epochs}, "
            f"num_steps_per_epoch={num_steps_per_epoch}, max_steps={max_steps}).",
            key="",
        )
    return updates
