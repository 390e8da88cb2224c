"""The one-method batch callback (AllenNLP 1.x style), listed under ``batch_callbacks``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from ipuflow.config import Registrable

if TYPE_CHECKING:
    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer


class BatchCallback(Registrable):
    """Called after every training host call and every validation batch."""

    def __call__(
        self,
        trainer: "GradientDescentTrainer",
        batch: Mapping[str, Any],
        outputs: Mapping[str, Any],
        batch_metrics: Optional[Dict[str, float]],
        epoch: int,
        batch_number: int,
        is_training: bool,
        is_primary: bool = True,
    ) -> None:
        """Handle one batch; `batch_metrics` is None except at logging points."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the callback holds (files, writers); called once when `train()` ends, also after an error."""
