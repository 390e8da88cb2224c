"""A tqdm progress bar per epoch (training and validation) with the running metrics."""

from __future__ import annotations

import os
import sys
from typing import Dict, Mapping, Optional, TextIO

from tqdm import tqdm

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import VALIDATION, TrainerEvent


def format_postfix(metrics: Mapping[str, float]) -> str:
    """``name: 0.1234, ...`` for the metrics whose names do not start with ``_``."""
    parts = []
    for name, value in metrics.items():
        if name.startswith("_"):
            continue
        # Learning rates such as 5e-05 would read as 0.0000 in fixed point.
        shown = f"{value:.4f}" if not isinstance(value, float) or value == 0 or abs(value) >= 1e-3 else f"{value:.2e}"
        parts.append(f"{name}: {shown}" if isinstance(value, float) else f"{name}: {value}")
    return ", ".join(parts)


FILE_FRIENDLY_ENVIRONMENT_VARIABLE = "IPUFLOW_FILE_FRIENDLY_LOGGING"
"""Set to 1 (as `ipuflow train --file-friendly-logging` does) to force the file-friendly bar."""


class LineWriter:
    """A stream for tqdm that turns each redraw into a line of its own: tqdm redraws in place with
    carriage returns, which a log file or a redirected stream would keep, joined on one line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write `text` without carriage returns or trailing padding, ending it with a newline;
        blank writes (the cursor moves of a terminal) are dropped."""
        line = text.replace("\r", "").rstrip()
        if line:
            self._stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        """Flush the underlying stream."""
        self._stream.flush()


@TrainerCallback.register("progress")
class ProgressCallback(TrainerCallback):
    """Shows a progress bar of host calls per epoch and of batches per validation.

    The postfix shows the metrics of the last logging point (never forcing a device sync). When
    the output is not a terminal (`file_friendly`, auto-detected by default), the bar is ASCII and
    redrawn at most every `file_friendly_interval` seconds, so log files stay readable.
    """

    def __init__(
        self,
        serialization_dir: str,
        file_friendly: Optional[bool] = None,
        file_friendly_interval: float = 10.0,
    ) -> None:
        super().__init__(serialization_dir)
        self._file_friendly = file_friendly
        self._file_friendly_interval = file_friendly_interval
        self._bar: Optional[tqdm] = None
        self._bar_key: Optional[tuple] = None
        self._bar_writes_lines = False

    def _is_file_friendly(self) -> bool:
        if self._file_friendly is not None:
            return self._file_friendly
        if os.environ.get(FILE_FRIENDLY_ENVIRONMENT_VARIABLE) == "1":
            return True
        return not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())

    def _open(self, total: Optional[int], initial: int, description: str) -> tqdm:
        friendly = self._is_file_friendly()
        return tqdm(
            total=total,
            initial=initial,
            desc=description,
            file=LineWriter(sys.stderr) if friendly else sys.stderr,
            ascii=friendly,
            dynamic_ncols=not friendly,
            mininterval=self._file_friendly_interval if friendly else 0.1,
            leave=True,
        )

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._bar_key = None

    def on_step_end(self, event: TrainerEvent) -> None:
        self._advance(event, event.logs)

    def on_prediction_step(self, event: TrainerEvent) -> None:
        if event.split == VALIDATION:
            self._advance(event, None)

    def _advance(self, event: TrainerEvent, batch_metrics: Optional[Dict[str, float]]) -> None:
        if not event.is_primary:
            return
        trainer, epoch, is_training = event.trainer, event.epoch, event.is_training
        assert event.batch_number is not None
        batch_number = event.batch_number
        key = (epoch, is_training)
        if self._bar_key != key:
            self._close()
            total = trainer.num_batches_per_epoch if is_training else trainer.num_validation_batches
            label = f"epoch {epoch} " + ("training" if is_training else "validation")
            self._bar = self._open(total, batch_number - 1, label)
            self._bar_key = key
            self._bar_writes_lines = self._is_file_friendly()
        bar = self._bar
        assert bar is not None
        if batch_metrics is not None:
            bar.set_postfix_str(format_postfix(batch_metrics), refresh=False)
        if bar.total is not None and bar.n + 1 >= bar.total and self._bar_writes_lines:
            # In a file every draw is a line of its own: the final one is drawn once, by close().
            bar.n += 1
        else:
            bar.update(1)

    def on_evaluate(self, event: TrainerEvent) -> None:
        if self._bar is not None and self._bar_key == (event.epoch, False) and event.metrics is not None:
            # Closing draws the bar once more; a refresh here would print the final bar twice.
            self._bar.set_postfix_str(format_postfix(event.metrics), refresh=False)
        self._close()

    def on_epoch_end(self, event: TrainerEvent) -> None:
        self._close()

    def on_train_end(self, event: TrainerEvent) -> None:
        self._close()
