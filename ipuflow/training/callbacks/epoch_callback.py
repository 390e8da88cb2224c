"""The one-method epoch callback (AllenNLP 1.x style), listed under ``epoch_callbacks``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from ipuflow.config import Registrable

if TYPE_CHECKING:
    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer


class EpochCallback(Registrable):
    """Called once before training with ``epoch=-1`` and ``metrics={}``, then after every epoch."""

    def __call__(
        self, trainer: "GradientDescentTrainer", metrics: Dict[str, Any], epoch: int, is_primary: bool = True
    ) -> None:
        """Handle the end of `epoch`."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the callback holds (files, writers); called once when `train()` ends, also after an error."""
