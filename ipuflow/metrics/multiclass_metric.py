"""The shared part of the classification metrics: class counts accumulated on the device."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import validators
from ipuflow.metrics.metric import Metric, beside
from ipuflow.metrics.summed_over_ranks import summed_over_ranks


class MulticlassMetric(Metric):
    """A metric over class predictions: scores `[..., num_classes]` (or class ids `[...]`) against
    gold class ids `[...]`. Rows with a negative gold label (such as the -100 of rows padded onto the
    batch axis) or a false `mask` are skipped.

    A subclass keeps integer counts in one tensor, made on the first batch (so `num_classes` can come
    from the scores' last dimension) on the predictions' device and updated there, so accumulating
    reads nothing back to the host; `get_metric` reads them once, summed over the ranks under
    torchrun. Each rank checkpoints its own counts.
    """

    def __init__(self, num_classes: Optional[int] = None) -> None:
        validators.positive_int("num_classes", num_classes, optional=True)
        self.num_classes = num_classes
        self._counts: Optional[torch.Tensor] = None
        self._updates = 0

    def _new_counts(self, num_classes: int, device: torch.device) -> torch.Tensor:
        """Zero counts for `num_classes` classes."""
        raise NotImplementedError

    def _add(self, counts: torch.Tensor, predictions: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor) -> None:
        """Add one batch to `counts`, in place: `predictions` are scores `[rows, classes]` or class ids
        `[rows]`; `gold` `[rows]` holds 0 in the rows to skip, which `keep` (bool `[rows]`) marks false."""
        raise NotImplementedError

    def _values(self, counts: Optional[torch.Tensor]) -> Dict[str, float]:
        """The metric's values from `counts` (None before any batch)."""
        raise NotImplementedError

    def _counts_from_stat_scores(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        """Counts from the true positives, false positives and false negatives that checkpoints held
        while the metric wrapped a torchmetrics metric."""
        raise NotImplementedError

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch of predictions."""
        predictions, gold = predictions.detach(), beside(predictions, gold.detach())
        scores = predictions.is_floating_point()
        if (predictions.dim() != gold.dim() + 1) if scores else (predictions.shape != gold.shape):
            raise ValueError(
                f"{type(self).__name__} expects scores [..., classes] or class ids shaped like the gold "
                f"labels {tuple(gold.shape)}; got {tuple(predictions.shape)} ({predictions.dtype})."
            )
        if self.num_classes is None:
            if not scores:
                raise ValueError(f"{type(self).__name__} needs num_classes to take class ids as predictions.")
            self.num_classes = predictions.shape[-1]
        if self._counts is None:
            self._counts = self._new_counts(self.num_classes, predictions.device)
        elif self._counts.device != predictions.device:
            self._counts = self._counts.to(predictions.device)
        keep = gold >= 0 if mask is None else (gold >= 0) & beside(predictions, mask).bool()
        gold = torch.where(keep, gold, torch.zeros_like(gold))
        flat = predictions.reshape(-1, predictions.shape[-1]) if scores else predictions.reshape(-1)
        self._add(self._counts, flat, gold.reshape(-1).long(), keep.reshape(-1))
        self._updates += 1

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The accumulated value(s)."""
        # As when the metrics wrapped torchmetrics: the ranks meet only once they have seen a batch.
        counts = summed_over_ranks(self._counts) if self._counts is not None and self._updates > 0 else None
        values = self._values(counts)
        if reset:
            self.reset()
        return values

    def reset(self) -> None:
        """Forget everything accumulated."""
        self._updates = 0
        if self._counts is not None:
            self._counts.zero_()

    def state_dict(self) -> Dict[str, Any]:
        """The class count, the number of batches and this rank's counts, on the CPU."""
        state: Dict[str, Any] = {"num_classes": self.num_classes, "updates": self._updates}
        if self._counts is not None:
            state["counts"] = self._counts.detach().cpu().clone()
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state_dict`'s result (or from a checkpoint of the torchmetrics-based metric)."""
        self.num_classes = state["num_classes"]
        self._updates = state["updates"]
        counts: Optional[torch.Tensor] = state.get("counts")
        if "state" in state:
            old = state["state"]
            counts = self._counts_from_stat_scores(old["tp"], old["fp"], old["fn"])
        if counts is None:
            self._counts = None
            return
        device = self._counts.device if self._counts is not None else counts.device
        self._counts = counts.to(device=device, dtype=torch.long, copy=True)
