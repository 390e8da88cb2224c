"""The `perplexity` metric of language models."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

import torch

from ipuflow.metrics.metric import Metric, beside
from ipuflow.metrics.summed_over_ranks import summed_over_ranks


@Metric.register("perplexity")
class Perplexity(Metric):
    """exp of the mean loss per predicted token, over every token of every batch (not a mean of
    per-batch perplexities): called with each row's summed token loss (`predictions`) and its
    number of predicted tokens (`gold`).

    The sums stay on the device (float64) and are read by `get_metric` only, summed over the ranks
    under torchrun."""

    def __init__(self) -> None:
        self._sums: Optional[torch.Tensor] = None  # [summed token loss, tokens]

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch: per-row summed token losses and per-row token counts."""
        losses = predictions.detach().double()
        counts = beside(losses, gold.detach()).double()
        if mask is not None:  # weighted, not indexed: boolean indexing would sync with the host
            weights = beside(losses, mask).to(losses.dtype)
            losses, counts = losses * weights, counts * weights
        if self._sums is None or self._sums.device != losses.device:
            self._sums = torch.zeros(2, dtype=torch.float64, device=losses.device)
        self._sums.add_(torch.stack([losses.sum(), counts.sum()]))

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The perplexity so far (1.0 before any token)."""
        mean_loss = 0.0
        if self._sums is not None:
            loss_sum, tokens = summed_over_ranks(self._sums).tolist()
            mean_loss = loss_sum / tokens if tokens > 0 else 0.0
        if reset:
            self.reset()
        return {"": math.exp(mean_loss) if mean_loss < 700 else math.inf}

    def reset(self) -> None:
        """Forget everything accumulated."""
        if self._sums is not None:
            self._sums.zero_()

    def state_dict(self) -> Dict[str, Any]:
        """This rank's summed loss and token count, on the CPU."""
        return {"sums": None if self._sums is None else self._sums.detach().cpu().clone()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state_dict`'s result."""
        sums = state.get("sums")
        self._sums = None if sums is None else sums.to(torch.float64 if self._sums is None else self._sums.device)
