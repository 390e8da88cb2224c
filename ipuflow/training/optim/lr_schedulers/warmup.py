"""The warm-up length of a schedule, from one spelling for every scheduler: `warmup_steps` (optimizer
updates) or `warmup_ratio` (a fraction of the run's updates). `num_warmup_steps`, the spelling some
schedulers used before, is still accepted there."""

from __future__ import annotations

import logging
import math
from typing import Optional

from ipuflow.config import ConfigurationError, validators

logger = logging.getLogger(__name__)


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
                f"warmup_steps ({warmup_steps}) and num_warmup_steps ({num_warmup_steps}) are the same "
                "setting (num_warmup_steps is its old name); give warmup_steps only.",
                key="num_warmup_steps",
            )
        logger.info("%s: num_warmup_steps is the old name of warmup_steps; both work.", scheduler)
        warmup_steps = num_warmup_steps
    if warmup_steps is not None and warmup_ratio is not None:
        raise ConfigurationError(
            f"{scheduler}: give warmup_steps or warmup_ratio, not both (found warmup_steps={warmup_steps}, "
            f"warmup_ratio={warmup_ratio}).",
            key="",
        )
    if warmup_ratio is not None:
        validators.fraction_below_one("warmup_ratio", warmup_ratio)
        if total_updates is None:
            raise ConfigurationError(
                f"{scheduler} needs the number of updates of the run, which the trainer injects as num_epochs × "
                "num_steps_per_epoch (or max_steps when it comes first) when the data loader has a length or "
                "max_steps is set; give warmup_steps instead.",
                key="warmup_ratio",
            )
        return math.ceil(warmup_ratio * total_updates)
    if warmup_steps is None:
        if default is None:
            raise ConfigurationError(f"{scheduler} needs warmup_steps or warmup_ratio.", key="")
        return default
    return validators.non_negative_int("warmup_steps", warmup_steps)


def run_updates(num_epochs: Optional[int], num_steps_per_epoch: Optional[int],
                max_steps: Optional[int] = None) -> Optional[int]:
    """The optimizer updates the run makes, a schedule's horizon: `max_steps` when it is set and comes
    before num_epochs × num_steps_per_epoch (as in the Hugging Face Trainer, where max_steps is the
    schedule's length), else that product; None when neither is known."""
    epochs = None if num_epochs is None or num_steps_per_epoch is None else int(num_epochs) * int(num_steps_per_epoch)
    if max_steps is None:
        return epochs
    return int(max_steps) if epochs is None else min(epochs, int(max_steps))
