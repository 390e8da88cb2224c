"""Logs a training/validation table of the epoch's metrics."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List

from ipuflow.training.callbacks.callback import TrainerCallback

if TYPE_CHECKING:
    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer

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


@TrainerCallback.register("console_metrics")
class ConsoleMetricsCallback(TrainerCallback):
    """After each epoch, logs (at INFO) a table of its training and validation metrics."""

    def on_epoch(
        self, trainer: "GradientDescentTrainer", metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs: Any
    ) -> None:
        if is_primary:
            table = format_metrics_table(metrics)
            if table:
                logger.info("Epoch %d metrics:\n%s", epoch, table)
