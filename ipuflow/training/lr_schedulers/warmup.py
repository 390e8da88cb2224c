"""The warm-up length of a schedule, from one spelling for every scheduler: `warmup_steps` (optimizer
updates) or `warmup_ratio` (a fraction of the run's updates). `num_warmup_steps`, the spelling some
schedulers used before, is still accepted there."""

from __future__ import annotations

import logging
import math
from typing import Optional

from ipuflow.config import ConfigurationError

logger = logging.getLogger(__name__)

_PATH = "trainer.learning_rate_scheduler"


def warmup_updates(
    scheduler: str,
    warmup_steps: Optional[int],
    warmup_ratio: Optional[float],
    total_updates: Optional[int],
    num_warmup_steps: Optional[int] = None,
    default: Optional[int] = None,
) -> int:
    """The number of warm-up updates; `total_updates` (the run's, if known) turns a ratio into updates."""
    if num_warmup_steps is not None:
        if warmup_steps is not None and warmup_steps != num_warmup_steps:
            raise ConfigurationError(
                f"{_PATH}: warmup_steps ({warmup_steps}) and num_warmup_steps ({num_warmup_steps}) are the same "
                "setting (num_warmup_steps is its old name); give warmup_steps only."
            )
        logger.info("%s.num_warmup_steps is the old name of warmup_steps; both work.", _PATH)
        warmup_steps = num_warmup_steps
    if warmup_steps is not None and warmup_ratio is not None:
        raise ConfigurationError(
            f"{_PATH} ({scheduler}): give warmup_steps or warmup_ratio, not both (found warmup_steps={warmup_steps}, "
            f"warmup_ratio={warmup_ratio})."
        )
    if warmup_ratio is not None:
        if isinstance(warmup_ratio, bool) or not 0.0 <= warmup_ratio < 1.0:
            raise ConfigurationError(f"{_PATH}.warmup_ratio: expected a fraction of the run's updates in [0, 1), "
                                     f"found {warmup_ratio!r}.")
        if total_updates is None:
            raise ConfigurationError(
                f"{_PATH}.warmup_ratio ({scheduler}) needs the number of updates of the run, which the trainer "
                "injects as num_epochs × num_steps_per_epoch when the data loader has a length; give warmup_steps "
                "instead."
            )
        return math.ceil(warmup_ratio * total_updates)
    if warmup_steps is None:
        if default is None:
            raise ConfigurationError(f"{_PATH} ({scheduler}) needs warmup_steps or warmup_ratio.")
        return default
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ConfigurationError(f"{_PATH}.warmup_steps: expected an integer >= 0, found {warmup_steps!r}.")
    return warmup_steps


def run_updates(num_epochs: Optional[int], num_steps_per_epoch: Optional[int]) -> Optional[int]:
    """num_epochs × num_steps_per_epoch, or None when either is unknown."""
    if num_epochs is None or num_steps_per_epoch is None:
        return None
    return int(num_epochs) * int(num_steps_per_epoch)
