"""Run learning-rate schedules one after another, each for a number of epochs."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError, Lazy, validators
from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler


@LearningRateScheduler.register("combined")
class CombinedLearningRateScheduler(LearningRateScheduler):
    """``schedulers: [[num_epochs, {scheduler}], ...]`` runs each scheduler for its span of epochs.

    Each one is built when its span starts, with ``num_epochs`` = its span, the injected
    `num_steps_per_epoch`, and the lr reached so far as its initial lr; its updates are counted
    from the start of its span. After the last span the lr stays where it ended.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        schedulers: List[Tuple[int, Lazy[LearningRateScheduler]]],
        num_steps_per_epoch: Optional[int] = None,
        validation_metric: Any = "-loss",
        last_epoch: int = -1,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        if not schedulers:
            raise ConfigurationError(key="schedulers", expected="at least one [num_epochs, scheduler]", found=[])
        for index, (span, _) in enumerate(schedulers):
            validators.positive_int(f"schedulers.{index}.0", span)
        self.schedulers = schedulers
        self.num_steps_per_epoch = num_steps_per_epoch
        self.validation_metric = validation_metric
        self._current_index: Optional[int] = None
        self._current: Optional[LearningRateScheduler] = None
        self._update_current(last_epoch + 1)

    def _span_of_epoch(self, epoch: int) -> Optional[Tuple[int, int]]:
        """(index, first epoch) of the scheduler that covers `epoch`, or None after the last."""
        start = 0
        for index, (span, _) in enumerate(self.schedulers):
            if epoch < start + span:
                return index, start
            start += span
        return None

    def _update_current(self, epoch: int) -> None:
        found = self._span_of_epoch(epoch)
        if found is None:
            self._current, self._current_index = None, None
            return
        index, start = found
        if index == self._current_index:
            return
        for group in self.optimizer.param_groups:
            # The next schedule starts from where the previous one left the lr.
            group["initial_lr"] = group["lr"]
        span, lazy = self.schedulers[index]
        self._current = lazy.construct(
            optimizer=self.optimizer,
            num_epochs=span,
            num_steps_per_epoch=self.num_steps_per_epoch,
            validation_metric=self.validation_metric,
        )
        self._current_index = index
        self._span_start = start

    def get_values(self) -> List[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self, metric: Optional[float] = None) -> None:
        self.last_epoch += 1
        self.metric = metric
        found = self._span_of_epoch(self.last_epoch + 1)
        if self._current is not None and found is not None and found[0] == self._current_index:
            self._current.step(metric)
        else:
            # A span ended: the next scheduler starts from the lr reached (or the lr stays there).
            self._update_current(self.last_epoch + 1)

    def step_batch(self, update_number: int) -> None:
        if self._current is not None and self.num_steps_per_epoch is not None:
            self._current.step_batch(update_number - self._span_start * self.num_steps_per_epoch)

    def state_dict(self) -> Dict[str, Any]:
        return {
            "last_epoch": self.last_epoch,
            "metric": self.metric,
            "current_index": self._current_index,
            "current": self._current.state_dict() if self._current is not None else None,
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.last_epoch = state_dict["last_epoch"]
        self.metric = state_dict["metric"]
        self._current_index = None
        self._update_current(self.last_epoch + 1)
        if self._current is not None and state_dict["current"] is not None:
            self._current.load_state_dict(state_dict["current"])
