"""The Metric base class: accumulates a measure over batches on the host side of training."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import Registrable


class Metric(Registrable):
    """A measure accumulated over batches. Built-ins: `categorical_accuracy`, `f1`,
    `mean_absolute_error`.

    `get_metric` returns values keyed by a suffix for the name the model gives the metric: the
    empty suffix is the metric's main value (`"accuracy"`), others are appended with an underscore
    (`"f1_fresh"`). Metric state stays on the device of the predictions and is read (synchronised)
    only by `get_metric`.
    """

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch; rows where `mask` is false are skipped."""
        raise NotImplementedError

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The values accumulated since the last reset (then reset, if `reset`)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget everything accumulated."""
        raise NotImplementedError

    def state_dict(self) -> Dict[str, Any]:
        """What has been accumulated, as plain containers and CPU tensors (checkpointed by the
        trainer, so a run resumed mid-epoch reports the same metrics as one that was not stopped)."""
        raise NotImplementedError

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from what `state_dict` returned."""
        raise NotImplementedError
