"""Momentum schedulers: the registrable base and `inverted_triangular`."""

from __future__ import annotations

from typing import List

import torch

from ipuflow.config import Registrable
from ipuflow.training.optim.scheduler import Scheduler


class MomentumScheduler(Scheduler, Registrable):
    """A schedule for the optimizer's ``momentum`` (e.g. SGD's); `optimizer` is injected."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, "momentum", last_epoch)


@MomentumScheduler.register("inverted_triangular")
class InvertedTriangular(MomentumScheduler):
    """Per epoch: momentum falls linearly from ``m`` to ``m / ratio`` over `cool_down` epochs, rises
    back to ``m`` over `warm_up` epochs, then stays at ``m``."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        cool_down: int,
        warm_up: int,
        ratio: int = 10,
        last_epoch: int = -1,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.cool_down = cool_down
        self.warm_up = warm_up
        self.ratio = ratio
        self._set_values(self.get_values())

    def get_values(self) -> List[float]:
        epoch = self.last_epoch + 1  # the epoch about to run
        values = []
        for base in self.base_values:
            low = base / self.ratio
            if epoch < self.cool_down:
                values.append(base - (base - low) * epoch / self.cool_down)
            elif epoch < self.cool_down + self.warm_up:
                values.append(low + (base - low) * (epoch - self.cool_down) / self.warm_up)
            else:
                values.append(base)
        return values
