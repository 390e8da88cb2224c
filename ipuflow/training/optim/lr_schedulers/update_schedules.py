"""Step-based schedules whose value is the initial lr times a factor of the update number.

The update number counts optimizer updates (1-based), after gradient accumulation and device
iterations; the first update of a warm-up of ``w`` updates uses ``lr / w``.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError
from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler, require_steps
from ipuflow.training.optim.lr_schedulers.warmup import run_updates, warmup_updates


class UpdateFactorScheduler(LearningRateScheduler):
    """``lr = initial_lr × factor(update_number)``, set before each host call."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, last_epoch)
        self.last_update = 1

    def factor(self, update_number: int) -> float:
        """The multiplier for optimizer update `update_number` (1-based)."""
        raise NotImplementedError

    def get_values(self) -> List[float]:
        factor = self.factor(self.last_update)
        return [base * factor for base in self.base_values]

    def step(self, metric: Optional[float] = None) -> None:
        self.last_epoch += 1
        self.metric = metric

    def step_batch(self, update_number: int) -> None:
        self.last_update = update_number
        self._set_values(self.get_values())


def _warmup(update_number: int, warmup_steps: int) -> Optional[float]:
    if warmup_steps > 0 and update_number < warmup_steps:
        return update_number / warmup_steps
    return None


@LearningRateScheduler.register("constant")
class ConstantLearningRateScheduler(UpdateFactorScheduler):
    """The initial lr throughout."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, last_epoch)
        self.step_batch(1)

    def factor(self, update_number: int) -> float:
        return 1.0


@LearningRateScheduler.register("constant_with_warmup")
class ConstantWithWarmupLearningRateScheduler(UpdateFactorScheduler):
    """Linear warm-up over `warmup_steps` updates (or `warmup_ratio` of the run's), then the initial lr.

    warmup_steps: warm-up length in optimizer updates (`num_warmup_steps` is its old name).
    warmup_ratio: warm-up length as a fraction of the run's updates, instead of warmup_steps.
    """

    horizon_fields = ("warmup_steps",)

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: Optional[int] = None,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        num_warmup_steps: Optional[int] = None,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.warmup_steps = warmup_updates("constant_with_warmup", warmup_steps, warmup_ratio,
                                           run_updates(num_epochs, num_steps_per_epoch, max_steps), num_warmup_steps)
        self.step_batch(1)

    def factor(self, update_number: int) -> float:
        warm = _warmup(update_number, self.warmup_steps)
        return 1.0 if warm is None else warm


class _CosineWithWarmup(UpdateFactorScheduler):
    horizon_fields: Tuple[str, ...] = ("num_training_steps", "warmup_steps")

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: Optional[int],
        warmup_ratio: Optional[float],
        num_warmup_steps: Optional[int],
        num_training_steps: Optional[int],
        num_cycles: float,
        num_epochs: Optional[int],
        num_steps_per_epoch: Optional[int],
        last_epoch: int,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        name = LearningRateScheduler.registered_name(type(self)) or type(self).__name__
        if num_training_steps is None:
            num_training_steps = require_steps(name, num_epochs, num_steps_per_epoch, max_steps)
        else:
            self.horizon_fields = ()  # configured, so a raised limit on --recover does not stretch it
        self.warmup_steps = warmup_updates(name, warmup_steps, warmup_ratio, num_training_steps, num_warmup_steps)
        if num_training_steps <= self.warmup_steps:
            raise ConfigurationError(
                key="num_training_steps", expected=f"more than warmup_steps ({self.warmup_steps})", found=num_training_steps
            )
        self.num_training_steps = num_training_steps
        self.num_cycles = num_cycles

    def progress(self, update_number: int) -> float:
        return (update_number - self.warmup_steps) / (self.num_training_steps - self.warmup_steps)


@LearningRateScheduler.register("cosine_with_warmup")
class CosineWithWarmupLearningRateScheduler(_CosineWithWarmup):
    """Linear warm-up, then a cosine from the initial lr to 0 over `num_cycles` half-waves
    (0.5: one decay) by `num_training_steps` (default: every update of the run).

    warmup_steps: warm-up length in optimizer updates (`num_warmup_steps` is its old name).
    warmup_ratio: warm-up length as a fraction of num_training_steps, instead of warmup_steps.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: Optional[int] = None,
        num_training_steps: Optional[int] = None,
        num_cycles: float = 0.5,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        num_warmup_steps: Optional[int] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, warmup_steps, warmup_ratio, num_warmup_steps, num_training_steps, num_cycles,
                         num_epochs, num_steps_per_epoch, last_epoch, max_steps)
        self.step_batch(1)

    def factor(self, update_number: int) -> float:
        warm = _warmup(update_number, self.warmup_steps)
        if warm is not None:
            return warm
        progress = self.progress(update_number)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * self.num_cycles * 2.0 * progress)))


@LearningRateScheduler.register("cosine_hard_restarts_with_warmup")
class CosineHardRestartsWithWarmupLearningRateScheduler(_CosineWithWarmup):
    """Linear warm-up, then `num_cycles` cosine decays to 0, each restarting at the initial lr.

    warmup_steps: warm-up length in optimizer updates (`num_warmup_steps` is its old name).
    warmup_ratio: warm-up length as a fraction of num_training_steps, instead of warmup_steps.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: Optional[int] = None,
        num_training_steps: Optional[int] = None,
        num_cycles: int = 1,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        num_warmup_steps: Optional[int] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, warmup_steps, warmup_ratio, num_warmup_steps, num_training_steps, num_cycles,
                         num_epochs, num_steps_per_epoch, last_epoch, max_steps)
        self.step_batch(1)

    def factor(self, update_number: int) -> float:
        warm = _warmup(update_number, self.warmup_steps)
        if warm is not None:
            return warm
        progress = self.progress(update_number)
        if progress >= 1.0:
            return 0.0
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((self.num_cycles * progress) % 1.0))))


@LearningRateScheduler.register("noam")
class NoamLR(UpdateFactorScheduler):
    """The Transformer schedule: ``factor · model_size^-0.5 · min(s^-0.5, s · warmup_steps^-1.5)``,
    the same lr for every group (the initial lr is not used).

    warmup_steps: warm-up length in optimizer updates.
    warmup_ratio: warm-up length as a fraction of the run's updates, instead of warmup_steps.
    """

    horizon_fields = ("warmup_steps",)

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        model_size: int,
        warmup_steps: Optional[int] = None,
        factor: float = 1.0,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.model_size = model_size
        self.warmup_steps = warmup_updates("noam", warmup_steps, warmup_ratio,
                                           run_updates(num_epochs, num_steps_per_epoch, max_steps))
        if self.warmup_steps < 1:
            raise ConfigurationError("noam needs at least 1 warm-up update.", key="warmup_steps")
        self.noam_factor = factor
        self.step_batch(1)

    def get_values(self) -> List[float]:
        step = max(self.last_update, 1)
        lr = self.noam_factor * self.model_size**-0.5 * min(step**-0.5, step * self.warmup_steps**-1.5)
        return [lr for _ in self.base_values]


@LearningRateScheduler.register("polynomial_decay")
class PolynomialDecay(UpdateFactorScheduler):
    """Linear warm-up over `warmup_steps` updates, then ``(lr − end)·((T − s)/(T − warmup))^power +
    end`` with ``T`` the run's updates (`max_steps` when set and reached first, else ``num_epochs ×
    num_steps_per_epoch``); `end_learning_rate` from update ``T`` on.

    warmup_steps: warm-up length in optimizer updates (default 0).
    warmup_ratio: warm-up length as a fraction of the run's updates, instead of warmup_steps.
    """

    horizon_fields = ("total_steps", "warmup_steps")

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        power: float = 1.0,
        warmup_steps: Optional[int] = None,
        end_learning_rate: float = 0.0,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        name = LearningRateScheduler.registered_name(type(self)) or "polynomial_decay"
        self.total_steps = require_steps(name, num_epochs, num_steps_per_epoch, max_steps)
        self.power = power
        self.warmup_steps = warmup_updates(name, warmup_steps, warmup_ratio, self.total_steps, default=0)
        self.end_learning_rate = end_learning_rate
        self.step_batch(1)

    def get_values(self) -> List[float]:
        step = self.last_update
        warm = _warmup(step, self.warmup_steps)
        if warm is not None:
            return [base * warm for base in self.base_values]
        if step >= self.total_steps:
            return [self.end_learning_rate for _ in self.base_values]
        remaining = ((self.total_steps - step) / (self.total_steps - self.warmup_steps)) ** self.power
        return [(base - self.end_learning_rate) * remaining + self.end_learning_rate for base in self.base_values]


@LearningRateScheduler.register("linear_with_warmup")
class LinearWithWarmup(PolynomialDecay):
    """Linear warm-up over `warmup_steps` updates, then a linear decay to 0 at the last update.

    warmup_steps: warm-up length in optimizer updates (default 100 when warmup_ratio is not given).
    warmup_ratio: warm-up length as a fraction of the run's updates, instead of warmup_steps.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        warmup_steps: Optional[int] = None,
        last_epoch: int = -1,
        warmup_ratio: Optional[float] = None,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(
            optimizer,
            num_epochs=num_epochs,
            num_steps_per_epoch=num_steps_per_epoch,
            max_steps=max_steps,
            power=1.0,
            warmup_steps=100 if warmup_steps is None and warmup_ratio is None else warmup_steps,
            end_learning_rate=0.0,
            warmup_ratio=warmup_ratio,
            last_epoch=last_epoch,
        )


@LearningRateScheduler.register("slanted_triangular")
class SlantedTriangular(UpdateFactorScheduler):
    """ULMFiT's slanted triangular lr (Howard & Ruder, 2018), per update: a linear rise over the first
    `cut_frac` of the run from ``lr/ratio`` to ``lr``, then a linear fall back to ``lr/ratio``.

    With `discriminative_fine_tuning`, group ``i`` of ``n`` starts from ``lr · decay_factor^(n-1-i)``
    (the last group, usually the top layers, keeps the full lr).
    """

    horizon_fields = ("total_steps",)

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        num_epochs: Optional[int] = None,
        num_steps_per_epoch: Optional[int] = None,
        cut_frac: float = 0.1,
        ratio: int = 32,
        discriminative_fine_tuning: bool = False,
        decay_factor: float = 0.38,
        last_epoch: int = -1,
        max_steps: Optional[int] = None,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.total_steps = require_steps("slanted_triangular", num_epochs, num_steps_per_epoch, max_steps)
        self.cut_frac = cut_frac
        self.ratio = ratio
        if discriminative_fine_tuning:
            depth = len(self.base_values)
            self.base_values = [base * decay_factor ** (depth - 1 - i) for i, base in enumerate(self.base_values)]
        self.step_batch(1)

    def factor(self, update_number: int) -> float:
        # Position 0 is the first update, so the run starts at lr/ratio.
        step = update_number - 1
        cut = max(int(self.total_steps * self.cut_frac), 1)
        if step < cut:
            proportion = step / cut
        else:
            proportion = max(0.0, 1 - (step - cut) / max(self.total_steps - cut, 1))
        return (1 + proportion * (self.ratio - 1)) / self.ratio
