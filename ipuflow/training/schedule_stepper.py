"""Moving a trainer's learning-rate and momentum schedules on both clocks, and sending new values to
the device only when one changed (poptorch's `setOptimizer` semantics: values change between host
calls)."""

from __future__ import annotations

from typing import Any, List, Optional

import torch

from ipuflow.execution.executor import StepExecutor
from ipuflow.training.scheduler import Scheduler


class ScheduleStepper:
    """Steps `schedulers` (those not None) and calls `executor.set_optimizer` after a step that
    changed a value."""

    def __init__(self, schedulers: List[Optional[Scheduler]], executor: StepExecutor,
                 optimizer: Optional[torch.optim.Optimizer]) -> None:
        self.schedulers: List[Scheduler] = [scheduler for scheduler in schedulers if scheduler is not None]
        self._executor = executor
        self._optimizer = optimizer

    def before_update(self, update_number: int) -> None:
        """Set the step-based values for optimizer update `update_number` (1-based), the next call's first."""
        if self.schedulers:
            self._step(lambda scheduler: scheduler.step_batch(update_number))

    def after_epoch(self, score: Optional[float]) -> None:
        """Step the epoch-based schedules with the epoch's signed validation score (None without validation)."""
        if self.schedulers:
            self._step(lambda scheduler: scheduler.step(score))

    def _step(self, step: Any) -> None:
        before = self._values()
        for scheduler in self.schedulers:
            step(scheduler)
        if self._values() != before:
            self._executor.set_optimizer(self._optimizer)  # type: ignore[arg-type]

    def _values(self) -> List[List[Any]]:
        return [[group.get(s.param_group_field) for group in s.optimizer.param_groups] for s in self.schedulers]
