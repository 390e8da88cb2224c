"""Where a training run stands, recorded with every checkpoint so that `--recover` knows exactly
what is left: training, the test evaluation, the archive, or nothing."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

logger = logging.getLogger(__name__)

# Why training ended. A run that ended at one of its limits continues when `--recover` raises it.
STOPPED_AT_NUM_EPOCHS = "num_epochs"
STOPPED_AT_MAX_STEPS = "max_steps"
STOPPED_EARLY = "early_stopping"  # the metric tracker ran out of patience
STOPPED_BY_CALLBACK = "callback"  # a callback set `trainer.control.should_stop`
_LIMITS = (STOPPED_AT_NUM_EPOCHS, STOPPED_AT_MAX_STEPS)


@dataclass
class RunStatus:
    """The phase of a run: training (``stopped`` is None), training finished (``stopped`` says
    why, with the counters and limits at that moment and the final metrics), then the test
    evaluation and the archive done or not."""

    stopped: Optional[str] = None
    epochs_completed: int = 0
    optimizer_updates: int = 0
    num_epochs: Optional[int] = None
    max_steps: Optional[int] = None
    metrics: Dict[str, Any] = field(default_factory=dict)
    test_evaluated: bool = False
    archived: bool = False

    @classmethod
    def stopped_now(cls, reason: str, epochs_completed: int, optimizer_updates: int, num_epochs: int,
                    max_steps: Optional[int], metrics: Dict[str, Any]) -> "RunStatus":
        """The status of training that stops now for `reason` (logged)."""
        status = cls(stopped=reason, epochs_completed=epochs_completed, optimizer_updates=optimizer_updates,
                     num_epochs=num_epochs, max_steps=max_steps, metrics=dict(metrics))
        logger.info("Training stopped: %s.", status.describe())
        return status

    @property
    def training_finished(self) -> bool:
        """Whether training ended (for any reason other than an interruption)."""
        return self.stopped is not None

    def continues_with(self, num_epochs: int, max_steps: Optional[int]) -> bool:
        """Whether a run that ended at a limit has training left under these (raised) limits."""
        if self.stopped not in _LIMITS:
            return False
        return self.epochs_completed < num_epochs and (max_steps is None or self.optimizer_updates < max_steps)

    def resumed_with(self, num_epochs: int, max_steps: Optional[int]) -> "RunStatus":
        """The status a resumed run continues with: a run stopped at a limit that is now higher is
        training again; any other status stays."""
        if self.training_finished and self.continues_with(num_epochs, max_steps):
            logger.info("The run had stopped at its %s limit, which is now higher: training continues.", self.stopped)
            return RunStatus()
        return self

    def describe(self) -> str:
        """One sentence for the log and for messages."""
        if self.stopped is None:
            return "training had not finished"
        why = {
            STOPPED_AT_NUM_EPOCHS: f"after the configured {self.num_epochs} epochs",
            STOPPED_AT_MAX_STEPS: f"at max_steps ({self.max_steps} optimizer updates)",
            STOPPED_EARLY: "early (the validation metric ran out of patience)",
            STOPPED_BY_CALLBACK: "early (a callback asked to stop)",
        }.get(self.stopped, f"({self.stopped})")
        done = [f"training stopped {why}, after {self.epochs_completed} complete epochs and "
                f"{self.optimizer_updates} optimizer updates"]
        if self.test_evaluated:
            done.append("the test set was evaluated")
        if self.archived:
            done.append("the model was archived")
        return "; ".join(done)

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON values."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Optional[Dict[str, Any]]) -> "RunStatus":
        """The status `to_dict` wrote (unknown keys ignored; none means a run still training)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in (values or {}).items() if key in known})


def stop_reason(out_of_patience: bool, asked_to_stop: bool, reached_max_steps: bool, epochs_done: bool) -> Optional[str]:
    """Why training ends at a validation point, if it does (the first that holds, in this order)."""
    for reason, holds in ((STOPPED_EARLY, out_of_patience), (STOPPED_BY_CALLBACK, asked_to_stop),
                          (STOPPED_AT_MAX_STEPS, reached_max_steps), (STOPPED_AT_NUM_EPOCHS, epochs_done)):
        if holds:
            return reason
    return None
