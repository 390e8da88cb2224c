"""Moving a trainer's learning-rate and momentum schedules on both clocks, and sending new values to
the device only when one changed (poptorch's `setOptimizer` semantics: values change between host
calls)."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

import torch

from ipuflow.execution.executor import StepExecutor
from ipuflow.training.optim.scheduler import Scheduler

logger = logging.getLogger(__name__)


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

    def resume(self, next_update: int, limits_raised: bool) -> None:
        """After a checkpoint was restored: set the values for `next_update` and warn of what changed
        (see `resume_notes`)."""
        self.before_update(next_update)
        for note in self.resume_notes(next_update, limits_raised):
            logger.warning("Resuming: %s", note)

    def resume_notes(self, next_update: int, limits_raised: bool) -> List[str]:
        """After a checkpoint was restored and `before_update(next_update)`: one sentence per schedule
        that a changed limit stretched, and, when `limits_raised` resumed a finished run, one if the lr
        is 0 from here on (a schedule that ended)."""
        from ipuflow.config.component_names import registered_name_of

        notes = []
        for scheduler in self.schedulers:
            name = registered_name_of(scheduler) or type(scheduler).__name__
            changes = getattr(scheduler, "horizon_changes", {})
            if changes:
                spans = ", ".join(f"{key} {old} → {new}" for key, (old, new) in sorted(changes.items()))
                values = ", ".join(f"{group.get(scheduler.param_group_field):.6g}" for group in self.optimizer_groups)
                notes.append(f"the {scheduler.param_group_field} schedule ({name}) follows the changed limits "
                             f"({spans}): optimizer update {next_update} uses {scheduler.param_group_field} {values}.")
        if limits_raised and self._optimizer is not None and all(group.get("lr") == 0 for group in self._optimizer.param_groups):
            names = ", ".join(registered_name_of(s) or type(s).__name__ for s in self.schedulers) or "none"
            notes.append(f"the learning rate is 0 from optimizer update {next_update} on (schedule: {names}), so "
                         "the training left will not change the weights: the schedule has ended and is not stretched "
                         "by the raised limits. Configure a schedule that spans the new length.")
        return notes

    @property
    def optimizer_groups(self) -> List[Dict[str, Any]]:
        """The optimizer's parameter groups (none without an optimizer)."""
        return [] if self._optimizer is None else list(self._optimizer.param_groups)

    def _step(self, step: Any) -> None:
        before = self._values()
        for scheduler in self.schedulers:
            step(scheduler)
        if self._values() != before:
            self._executor.set_optimizer(self._optimizer)  # type: ignore[arg-type]

    def _values(self) -> List[List[Any]]:
        return [[group.get(s.param_group_field) for group in s.optimizer.param_groups] for s in self.schedulers]
