"""Cosine annealing with warm restarts (SGDR, Loshchilov & Hutter, 2017), stepped per epoch."""

from __future__ import annotations

import logging
import math
from typing import List

import torch

from ipuflow.config import validators
from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler

logger = logging.getLogger(__name__)


@LearningRateScheduler.register("cosine")
class CosineWithRestarts(LearningRateScheduler):
    """Anneal from the lr to `eta_min` over a cycle of `t_initial` epochs, then restart.

    Each restart multiplies the cycle length by `t_mul` and the starting lr by `eta_mul`.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        t_initial: int,
        t_mul: float = 1.0,
        eta_min: float = 0.0,
        eta_mul: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        validators.positive_int("t_initial", t_initial)
        validators.non_negative_number("eta_min", eta_min)
        if t_initial == 1 and t_mul == 1 and eta_mul == 1:
            logger.warning("cosine with t_initial=1, t_mul=1 and eta_mul=1 keeps the lr constant")
        super().__init__(optimizer, last_epoch)
        self.t_initial = t_initial
        self.t_mul = t_mul
        self.eta_min = eta_min
        self.eta_mul = eta_mul
        self._set_values(self.get_values())

    def get_values(self) -> List[float]:
        epoch = self.last_epoch + 1  # the epoch about to run
        cycle_start, cycle_length, cycle = 0, float(self.t_initial), 0
        while epoch >= cycle_start + max(int(cycle_length), 1):
            cycle_start += max(int(cycle_length), 1)
            cycle_length *= self.t_mul
            cycle += 1
        position = (epoch - cycle_start) / max(int(cycle_length), 1)
        scale = self.eta_mul**cycle
        return [
            self.eta_min + (base * scale - self.eta_min) * 0.5 * (1 + math.cos(math.pi * position))
            for base in self.base_values
        ]
