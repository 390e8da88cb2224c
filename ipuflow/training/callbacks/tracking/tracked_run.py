"""What an experiment tracker does for ipuflow (open or resume a run, log parameters, metrics and
files, close it), and the record in the serialization directory that lets `-r` continue the run."""

from __future__ import annotations

import json
import logging
import math
import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ipuflow.storage import write_json_atomically
from ipuflow.training.state.interruption import TrainingInterrupted

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunEnd:
    """How training ended for a tracked run: finished (`error` None), stopped by a signal (Ctrl-C,
    SIGTERM: the run is checkpointed and `-r` continues it) or failed (any other error)."""

    error: Optional[BaseException] = None

    @property
    def signal(self) -> Optional[signal.Signals]:
        """The signal that stopped training, if one did."""
        if isinstance(self.error, KeyboardInterrupt):
            return signal.SIGINT
        name = self.error.signal_name if isinstance(self.error, TrainingInterrupted) else None
        return signal.Signals[name] if name is not None and name in signal.Signals.__members__ else None

    @property
    def failed(self) -> bool:
        """An error other than a signal ended training."""
        return self.error is not None and self.signal is None

    @property
    def exit_code(self) -> int:
        """As a shell reports the process: 0, 128 + the signal's number, or 1."""
        stopped_by = self.signal
        return 0 if self.error is None else 128 + int(stopped_by) if stopped_by is not None else 1


class TrackedRun(ABC):
    """One run in an experiment tracker (an MLflow run, a W&B run), opened by `open`.

    Subclasses talk to one tracker; the record `run_record` names the run so that a later process
    (`ipuflow train -r`, or the archive step after training) reopens the same one.
    """

    #: The file in the serialization directory that records the run.
    record_name: str = ""

    def __init__(self, serialization_dir: str) -> None:
        self.serialization_dir = Path(serialization_dir)
        self.run_id: Optional[str] = None
        self.is_open = False
        # The last step each metric was logged at by an earlier process of this run: a resumed run
        # replays the updates since its checkpoint, and those values are already in the tracker.
        self.logged_steps: Dict[str, int] = {}
        self._resumed_steps: Dict[str, int] = {}

    @property
    def record_path(self) -> Path:
        """Where the run's record lives."""
        return self.serialization_dir / self.record_name

    def read_record(self) -> Dict[str, Any]:
        """The record an earlier process wrote, or {} for a new run."""
        try:
            record = json.loads(self.record_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            logger.warning("%s cannot be read (%s): a new tracking run is started.", self.record_path, error)
            return {}
        return record if isinstance(record, dict) else {}

    def write_record(self) -> None:
        """Record the run (and the steps logged so far) for the next process."""
        if self.run_id is None:
            return
        write_json_atomically(self.record_path, {**self.record_fields(), "run_id": self.run_id,
                                                 "logged_steps": self.logged_steps})

    def open(self, config: Optional[Mapping[str, Any]]) -> None:
        """Open the recorded run, or start one and log `config` (the resolved experiment config) as its parameters."""
        if self.is_open:
            return
        record = self.read_record()
        recorded_id = record.get("run_id") if isinstance(record.get("run_id"), str) else None
        self.run_id = self.start(recorded_id, record)
        self.is_open = True
        steps = record.get("logged_steps") if recorded_id == self.run_id else None
        self.logged_steps = {key: int(step) for key, step in (steps or {}).items() if isinstance(step, int)}
        self._resumed_steps = {**self.logged_steps, **self.steps_in_tracker()}
        if recorded_id is None:
            if config:
                self.log_config(dict(config))
            logger.info("Tracking this run in %s (run %s)", self.describe(), self.run_id)
        else:
            logger.info("Continuing tracking run %s in %s", self.run_id, self.describe())
        self.write_record()

    def log_metrics(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log the finite numbers in `metrics` at `step`, except those an earlier process logged."""
        numbers = {
            key: float(value) for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and step > self._resumed_steps.get(key, -1)
        }
        if not numbers:
            return
        self.log_numbers(numbers, step)
        for key in numbers:
            self.logged_steps[key] = step

    def close(self, end: RunEnd = RunEnd()) -> None:
        """Record the steps logged, then end the run as `end` says."""
        if not self.is_open:
            return
        self.write_record()
        self.is_open = False
        self.finish(end)

    # -- what each tracker implements -------------------------------------------------------

    @abstractmethod
    def start(self, run_id: Optional[str], record: Mapping[str, Any]) -> str:
        """Resume run `run_id` (None: create one); return the run's id."""

    @abstractmethod
    def log_config(self, config: Dict[str, Any]) -> None:
        """Log the experiment's config as the run's parameters."""

    @abstractmethod
    def log_numbers(self, metrics: Dict[str, float], step: int) -> None:
        """Log metric values at `step`."""

    @abstractmethod
    def log_file(self, path: Path) -> None:
        """Attach a file (the model archive) to the run."""

    @abstractmethod
    def finish(self, end: RunEnd) -> None:
        """End the run in the tracker's terms for `end`."""

    def steps_in_tracker(self) -> Dict[str, int]:
        """The last step of each metric as the tracker itself knows it (when it can be asked)."""
        return {}

    def record_fields(self) -> Dict[str, Any]:
        """What else the record keeps (e.g. the tracking URI)."""
        return {}

    def describe(self) -> str:
        """Where the run is stored, for the log."""
        return type(self).__name__
