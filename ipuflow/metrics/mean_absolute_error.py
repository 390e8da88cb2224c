"""The `mean_absolute_error` metric."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.metrics.metric import Metric


@Metric.register("mean_absolute_error")
class MeanAbsoluteError(Metric):
    """The mean of |prediction - gold| over the unmasked values."""

    def __init__(self) -> None:
        self._error_sum: Any = None
        self._count: Any = None
        self._updates = 0

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch of predicted values."""
        predictions, gold = predictions.detach(), gold.detach()
        if predictions.numel() != gold.numel():
            raise ValueError(
                f"MeanAbsoluteError needs one prediction per gold value; got {tuple(predictions.shape)} "
                f"predictions for {tuple(gold.shape)} gold values."
            )
        if self._error_sum is None:
            self._make_sums()
        if self._error_sum.device != predictions.device:
            self._error_sum = self._error_sum.to(predictions.device)
            self._count = self._count.to(predictions.device)
        errors = (predictions.reshape(gold.shape).float() - gold.float()).abs()
        # Weighting by the mask skips values without boolean indexing, which would sync with the host.
        weights = torch.ones_like(errors) if mask is None else mask.reshape(gold.shape).to(errors.dtype)
        self._error_sum.update((errors * weights).sum())
        self._count.update(weights.sum())
        self._updates += 1

    def _make_sums(self) -> None:
        from torchmetrics.aggregation import SumMetric  # importing torchmetrics takes a second

        # Two sums rather than a weighted MeanMetric: with nan_strategy="disable" (needed to avoid
        # a host read of every batch for the NaN check) torchmetrics 1.9's MeanMetric drops the
        # weights, so masked values would count.
        self._error_sum = SumMetric(nan_strategy="disable")
        self._count = SumMetric(nan_strategy="disable")

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The mean absolute error so far (0.0 before any value)."""
        value = 0.0
        if self._count is not None and self._updates > 0:
            count = float(self._count.compute())
            value = float(self._error_sum.compute()) / count if count > 0 else 0.0
        if reset:
            self.reset()
        return {"": value}

    def reset(self) -> None:
        """Forget everything accumulated."""
        self._updates = 0
        if self._error_sum is not None:
            self._error_sum.reset()
            self._count.reset()

    def state_dict(self) -> Dict[str, Any]:
        """The summed errors, the count and the number of batches, on the CPU."""
        if self._error_sum is None or self._updates == 0:
            return {"updates": 0}
        # The accumulated sums themselves, not compute(): under torchrun that sums every rank's.
        return {"updates": self._updates, "error_sum": self._error_sum.sum_value.detach().cpu().clone(),
                "count": self._count.sum_value.detach().cpu().clone()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state_dict`'s result."""
        self.reset()
        if state["updates"]:
            if self._error_sum is None:
                self._make_sums()
            self._error_sum.update(state["error_sum"])
            self._count.update(state["count"])
            self._updates = state["updates"]
