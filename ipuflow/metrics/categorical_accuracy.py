"""The `categorical_accuracy` metric."""

from __future__ import annotations

from typing import Dict, Optional

import torch

from ipuflow.config import validators
from ipuflow.metrics.metric import Metric
from ipuflow.metrics.multiclass_metric import MulticlassMetric


@Metric.register("categorical_accuracy")
class CategoricalAccuracy(MulticlassMetric):
    """The fraction of rows whose gold class is among the `top_k` highest-scoring classes."""

    def __init__(self, top_k: int = 1, num_classes: Optional[int] = None) -> None:
        validators.positive_int("top_k", top_k)
        super().__init__(num_classes=num_classes)
        self.top_k = top_k

    def _new_counts(self, num_classes: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(2, dtype=torch.long, device=device)  # rows right, rows kept

    def _add(self, counts: torch.Tensor, predictions: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor) -> None:
        if predictions.dim() == 1:
            if self.top_k > 1:
                raise ValueError(f"CategoricalAccuracy with top_k {self.top_k} needs scores [..., classes], not class ids.")
            right = predictions == gold
        elif self.top_k == 1:
            right = predictions.argmax(dim=-1) == gold
        else:
            best = predictions.topk(min(self.top_k, predictions.shape[-1]), dim=-1).indices
            right = (best == gold.unsqueeze(-1)).any(dim=-1)
        counts.add_(torch.stack([(right & keep).sum(), keep.sum()]))

    def _values(self, counts: Optional[torch.Tensor]) -> Dict[str, float]:
        if counts is None:
            return {"": 0.0}
        right, kept = counts.tolist()
        return {"": right / kept if kept else 0.0}

    def _counts_from_stat_scores(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        # Micro-averaged accuracy is tp / (tp + fn), summed over the classes.
        return torch.stack([tp.sum(), (tp + fn).sum()]).long()
