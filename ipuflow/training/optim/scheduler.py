"""The base of learning-rate and momentum schedulers: set one optimizer field per param group.

Two clocks drive a schedule. `step(metric)` runs once at the end of each epoch (with the signed
validation score, or None); `step_batch(update_number)` runs before each host call with the 1-based
number of the next optimizer update, so warm-ups and decays are counted in updates, after gradient
accumulation and device iterations. The values set stay constant within a host call (poptorch's
`setOptimizer` semantics), so with ``device_iterations > 1`` a step-based schedule moves in jumps of
``device_iterations`` updates.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError


class Scheduler:
    """Sets ``param_group[field]`` from the initial values (``initial_<field>``) and a schedule.

    `horizon_fields` name the attributes computed from the run's length (`num_epochs`,
    `num_steps_per_epoch`, `max_steps`). A checkpoint does not restore them, so `--recover` with a
    raised limit stretches the schedule to the new length (as the Hugging Face Trainer does on resume);
    `horizon_changes` then holds each one's (checkpointed, new) value.
    """

    horizon_fields: Tuple[str, ...] = ()

    def __init__(self, optimizer: torch.optim.Optimizer, param_group_field: str, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.param_group_field = param_group_field
        self._initial_field = f"initial_{param_group_field}"
        for index, group in enumerate(self.optimizer.param_groups):
            if param_group_field not in group:
                raise ConfigurationError(
                    f"This scheduler sets {param_group_field!r}, but the optimizer's parameter group {index} "
                    f"has no such option (found {sorted(k for k in group if k != 'params')})"
                )
            if last_epoch == -1 or self._initial_field not in group:
                group.setdefault(self._initial_field, group[param_group_field])
        self.base_values: List[float] = [group[self._initial_field] for group in self.optimizer.param_groups]
        self.last_epoch = last_epoch
        self.metric: Optional[float] = None

    def get_values(self) -> List[float]:
        """The values for the current position in the schedule, one per param group."""
        raise NotImplementedError

    def _set_values(self, values: List[float]) -> None:
        for group, value in zip(self.optimizer.param_groups, values):
            group[self.param_group_field] = value

    def step(self, metric: Optional[float] = None) -> None:
        """End of an epoch: advance the epoch count and set the values for the next epoch."""
        self.last_epoch += 1
        self.metric = metric
        self._set_values(self.get_values())

    def step_batch(self, update_number: int) -> None:
        """Before a host call: set the values for optimizer update `update_number` (1-based).

        Epoch-based schedules ignore it.
        """

    def state_dict(self) -> Dict[str, Any]:
        """Everything but the optimizer, as plain values."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "horizon_changes")}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned (the optimizer's own state holds the current values),
        except the `horizon_fields`, which follow the current limits."""
        self.horizon_changes: Dict[str, Tuple[Any, Any]] = {
            key: (state_dict[key], getattr(self, key)) for key in self.horizon_fields
            if key in state_dict and state_dict[key] != getattr(self, key, None)}
        self.__dict__.update({key: value for key, value in state_dict.items()
                              if key not in self.horizon_fields and key != "horizon_changes"})
