"""The `mean_absolute_error` metric."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.metrics.metric import Metric, beside
from ipuflow.metrics.summed_over_ranks import summed_over_ranks

ERROR_SUM, COUNT = 0, 1


@Metric.register("mean_absolute_error")
class MeanAbsoluteError(Metric):
    """The mean of |prediction - gold| over the unmasked values.

    The sums stay on the predictions' device (in float64) and are read by `get_metric` only, summed
    over the ranks under torchrun; each rank checkpoints its own."""

    def __init__(self) -> None:
        self._sums: Optional[torch.Tensor] = None
        self._updates = 0

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch of predicted values."""
        predictions, gold = predictions.detach(), beside(predictions, gold.detach())
        if predictions.numel() != gold.numel():
            raise ValueError(
                f"MeanAbsoluteError needs one prediction per gold value; got {tuple(predictions.shape)} "
                f"predictions for {tuple(gold.shape)} gold values."
            )
        if self._sums is None:
            self._sums = torch.zeros(2, dtype=torch.float64, device=predictions.device)
        elif self._sums.device != predictions.device:
            self._sums = self._sums.to(predictions.device)
        errors = (predictions.reshape(gold.shape).float() - gold.float()).abs()
        # Weighting by the mask skips values without boolean indexing, which would sync with the host.
        weights = torch.ones_like(errors) if mask is None else mask.reshape(gold.shape).to(errors)
        self._sums.add_(torch.stack([(errors * weights).sum(), weights.sum()]))
        self._updates += 1

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The mean absolute error so far (0.0 before any value)."""
        value = 0.0
        if self._sums is not None and self._updates > 0:
            error_sum, count = summed_over_ranks(self._sums).tolist()
            value = error_sum / count if count > 0 else 0.0
        if reset:
            self.reset()
        return {"": value}

    def reset(self) -> None:
        """Forget everything accumulated."""
        self._updates = 0
        if self._sums is not None:
            self._sums.zero_()

    def state_dict(self) -> Dict[str, Any]:
        """This rank's summed errors and count and the number of batches, on the CPU."""
        if self._sums is None or self._updates == 0:
            return {"updates": 0}
        sums = self._sums.detach().cpu()
        return {"updates": self._updates, "error_sum": sums[ERROR_SUM].clone(), "count": sums[COUNT].clone()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state_dict`'s result."""
        self.reset()
        if state["updates"]:
            sums = torch.stack([state["error_sum"], state["count"]]).to(torch.float64)
            self._sums = sums if self._sums is None else sums.to(self._sums.device)
            self._updates = state["updates"]
