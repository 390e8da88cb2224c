"""Logs a training/validation table of the epoch's metrics."""

from __future__ import annotations

import logging
from typing import Any, Dict, List

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent

logger = logging.getLogger(__name__)


def format_metrics_table(metrics: Dict[str, Any]) -> str:
    """A ``metric | training | validation`` table from ``training_*``/``validation_*`` keys."""
    names: List[str] = []
    for key in metrics:
        for prefix in ("training_", "validation_"):
            if key.startswith(prefix) and key[len(prefix) :] not in names and key != "training_duration":
                names.append(key[len(prefix) :])
    if not names:
        return ""

    def cell(key: str) -> str:
        value = metrics.get(key)
        return "N/A" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value))

    width = max(len(name) for name in names)
    lines = [f"{'metric'.ljust(width)} | {'training':>10} | {'validation':>10}"]
    lines.append("-" * len(lines[0]))
    for name in sorted(names):
        lines.append(f"{name.ljust(width)} | {cell('training_' + name):>10} | {cell('validation_' + name):>10}")
    return "\n".join(lines)


def metrics_missing_in_training(metrics: Dict[str, Any]) -> List[str]:
    """Names that have a validation value but no training one (shown as N/A)."""
    return sorted(
        key[len("validation_"):]
        for key in metrics
        if key.startswith("validation_") and f"training_{key[len('validation_'):]}" not in metrics
    )


@TrainerCallback.register("console_metrics")
class ConsoleMetricsCallback(TrainerCallback):
    """After each epoch, logs (at INFO) a table of its training and validation metrics; the first
    time training metrics show N/A because the executor returns only some micro-batches'
    outputs, it says once how to get them."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self._explained_missing = False

    def on_epoch_end(self, event: TrainerEvent) -> None:
        trainer, metrics, epoch = event.trainer, event.metrics or {}, event.epoch
        if event.is_primary:
            table = format_metrics_table(metrics)
            if table:
                logger.info("Epoch %d metrics:\n%s", epoch, table)
            missing = metrics_missing_in_training(metrics)
            if missing and not self._explained_missing and not trainer.computes_training_metrics:
                self._explained_missing = True
                output_mode = trainer.executor.options.plan.output_mode
                logger.info(
                    "Training %s shown as N/A: the model's metrics are computed on training batches only with "
                    'trainer.executor.output_mode: "all" (here it is "%s", so each host call returns the '
                    "outputs of only some micro-batches). The training loss is always reported.",
                    ", ".join(missing), output_mode,
                )
