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
    patience: Optional[int] = None
    test_evaluated: bool = False
    archived: bool = False

    @classmethod
    def stopped_now(cls, reason: str, epochs_completed: int, optimizer_updates: int, num_epochs: int,
                    max_steps: Optional[int], metrics: Dict[str, Any], patience: Optional[int] = None) -> "RunStatus":
        """The status of training that stops now for `reason` (logged)."""
        status = cls(stopped=reason, epochs_completed=epochs_completed, optimizer_updates=optimizer_updates,
                     num_epochs=num_epochs, max_steps=max_steps, metrics=dict(metrics), patience=patience)
        logger.info("Training stopped: %s.", status.describe())
        return status

    @property
    def training_finished(self) -> bool:
        """Whether training ended (for any reason other than an interruption)."""
        return self.stopped is not None

    def continues_with(self, num_epochs: int, max_steps: Optional[int], patience: Optional[int] = None) -> bool:
        """Whether a run that ended at a limit, or early for lack of patience, has training left under
        these (raised) limits: below both training limits, and, after an early stop, with a patience
        cleared or raised above the one it ran out of."""
        if self.stopped == STOPPED_EARLY:
            if not self.patience_raised(patience):
                return False
        elif self.stopped not in _LIMITS:
            return False
        return self.epochs_completed < num_epochs and (max_steps is None or self.optimizer_updates < max_steps)

    def patience_raised(self, patience: Optional[int]) -> bool:
        """Whether `patience` allows more validations without improvement than the run's had
        (a status that did not record its patience counts only a cleared one)."""
        return patience is None or (self.patience is not None and patience > self.patience)

    def resumed_with(self, num_epochs: int, max_steps: Optional[int], patience: Optional[int] = None) -> "RunStatus":
        """The status a resumed run continues with: a run stopped at a limit that is now higher (or
        early, with a patience now higher or cleared) is training again; any other status stays."""
        if self.training_finished and self.continues_with(num_epochs, max_steps, patience):
            which = ("patience, which is now raised or cleared" if self.stopped == STOPPED_EARLY
                     else f"{self.stopped} limit, which is now higher")
            logger.info("The run had stopped at its %s: training continues.", which)
            return RunStatus()
        return self

    def why_no_training(self, num_epochs: int, max_steps: Optional[int], patience: Optional[int]) -> Optional[str]:
        """For a finished run that `--recover` asked to train on: why these limits train nothing, with
        what to change (None if training continues)."""
        if not self.training_finished or self.continues_with(num_epochs, max_steps, patience):
            return None
        why = f"The run {self.describe().split(';')[0].replace('training stopped', 'stopped')}"
        if self.stopped == STOPPED_BY_CALLBACK:
            return f"{why}; raising limits does not undo a callback's stop, so nothing would train."
        fixes = []
        if self.stopped == STOPPED_EARLY and not self.patience_raised(patience):
            fixes.append(f"raise trainer.patience above {self.patience} or clear it "
                         "(-o '{\"trainer.patience\": null}')" if self.patience is not None else
                         "clear trainer.patience (-o '{\"trainer.patience\": null}')")
        if self.epochs_completed >= num_epochs:
            fixes.append(f"raise trainer.num_epochs above {self.epochs_completed}")
        if max_steps is not None and self.optimizer_updates >= max_steps:
            fixes.append(f"raise trainer.max_steps above {self.optimizer_updates} or clear it")
        return f"{why}, and the limits given train nothing more. To train on, {' and '.join(fixes)}."

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
        done = [f"training stopped {why}, after {_complete_epochs(self.epochs_completed)} and "
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


def _complete_epochs(count: int) -> str:
    """A count of complete epochs with the numbers they had (from 0, as metrics.json numbers them)."""
    if count == 0:
        return "0 complete epochs"
    numbers = "0" if count == 1 else f"0 to {count - 1}"
    return f"{count} complete epoch{'s' if count > 1 else ''} (numbered {numbers}, as in metrics.json)"


def stop_reason(out_of_patience: bool, asked_to_stop: bool, reached_max_steps: bool, epochs_done: bool) -> Optional[str]:
    """Why training ends at a validation point, if it does (the first that holds, in this order)."""
    for reason, holds in ((STOPPED_EARLY, out_of_patience), (STOPPED_BY_CALLBACK, asked_to_stop),
                          (STOPPED_AT_MAX_STEPS, reached_max_steps), (STOPPED_AT_NUM_EPOCHS, epochs_done)):
        if holds:
            return reason
    return None
