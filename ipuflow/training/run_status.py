"""Where a training run stands, recorded with every checkpoint so that `--recover` knows exactly
what is left: training, the test evaluation, the archive, or nothing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

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

    @property
    def training_finished(self) -> bool:
        """Whether training ended (for any reason other than an interruption)."""
        return self.stopped is not None

    def continues_with(self, num_epochs: int, max_steps: Optional[int]) -> bool:
        """Whether a run that ended at a limit has training left under these (raised) limits."""
        if self.stopped not in _LIMITS:
            return False
        return self.epochs_completed < num_epochs and (max_steps is None or self.optimizer_updates < max_steps)

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
