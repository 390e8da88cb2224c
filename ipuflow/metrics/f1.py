"""The `f1` metric: F1 score, averaged or per class."""

from __future__ import annotations

from typing import Dict, Optional

import torch

from ipuflow.config import validators
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics.metric import Metric
from ipuflow.metrics.multiclass_metric import MulticlassMetric

AVERAGES = ("macro", "micro", "weighted", "none")

# The rows of the counts, one column per class and a last column for class ids outside the classes.
TRUE_POSITIVES, PREDICTED, GOLD = 0, 1, 2


@Metric.register("f1")
class F1Measure(MulticlassMetric):
    """F1 score over classes: `macro` (the mean over classes that occur in the gold labels or the
    predictions), `micro`, `weighted` (by support), or `none`: one value per class, keyed by the
    class's label from the vocabulary (`f1_fresh`) or, without one, its id (`f1_0`).

    The vocabulary is passed in by the model; it also gives `num_classes`. A predicted class id
    outside `[0, num_classes)` counts as wrong; a kept gold label outside it is an error, reported
    when the metric is read.
    """

    def __init__(
        self,
        average: str = "macro",
        num_classes: Optional[int] = None,
        vocab: Optional[Vocabulary] = None,
        label_namespace: str = "labels",
    ) -> None:
        validators.choice("average", average, AVERAGES)
        if num_classes is None and vocab is not None and vocab.get_vocab_size(label_namespace) > 0:
            num_classes = vocab.get_vocab_size(label_namespace)
        super().__init__(num_classes=num_classes)
        self.average = average
        self.vocab = vocab
        self.label_namespace = label_namespace

    def _new_counts(self, num_classes: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(3, num_classes + 1, dtype=torch.long, device=device)

    def _add(self, counts: torch.Tensor, predictions: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor) -> None:
        outside = counts.shape[1] - 1
        predicted = predictions.argmax(dim=-1) if predictions.dim() == 2 else predictions.long()
        predicted = torch.where((predicted >= 0) & (predicted < outside), predicted, torch.full_like(predicted, outside))
        gold = torch.where(gold < outside, gold, torch.full_like(gold, outside))
        weights = keep.long()
        # scatter_add_ on the device: no host read, unlike boolean indexing or CUDA's bincount.
        counts[TRUE_POSITIVES].scatter_add_(0, gold, weights * (predicted == gold))
        counts[PREDICTED].scatter_add_(0, predicted, weights)
        counts[GOLD].scatter_add_(0, gold, weights)

    def _values(self, counts: Optional[torch.Tensor]) -> Dict[str, float]:
        if counts is None:
            if self.average != "none":
                return {"": 0.0}
            return {self._class_name(index): 0.0 for index in range(self.num_classes or 0)}
        counts = counts.cpu().double()
        if counts[GOLD, -1] > 0:
            raise ValueError(
                f"F1Measure: {int(counts[GOLD, -1])} gold labels were not below num_classes ({counts.shape[1] - 1}); "
                "the metric's num_classes (or the vocabulary's label namespace) does not cover the gold labels."
            )
        true_positives, predicted, gold = counts[:, :-1]
        per_class = _ratio(2 * true_positives, predicted + gold)
        if self.average == "none":
            return {self._class_name(index): value for index, value in enumerate(per_class.tolist())}
        if self.average == "micro":
            value = _ratio(2 * true_positives.sum(), predicted.sum() + gold.sum())
        elif self.average == "weighted":
            value = _ratio((per_class * gold).sum(), gold.sum())
        else:  # macro, over the classes that were predicted or in the gold labels
            present = (predicted + gold) > 0
            value = _ratio(per_class.sum(), present.sum().double())
        return {"": float(value)}

    def _counts_from_stat_scores(self, tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
        counts = self._new_counts(self.num_classes or tp.numel(), tp.device)
        # Micro averaging kept one sum over the classes: class 0 holds it, which gives the same micro F1.
        counts[:, : tp.numel()] = torch.stack([tp, tp + fp, tp + fn]).reshape(3, -1).long()
        return counts

    def _class_name(self, index: int) -> str:
        if self.vocab is not None and index < self.vocab.get_vocab_size(self.label_namespace):
            return self.vocab.get_token_from_index(index, self.label_namespace)
        return str(index)


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, 0 where the denominator is 0."""
    nonzero = denominator > 0
    return torch.where(nonzero, numerator / torch.where(nonzero, denominator, torch.ones_like(denominator)),
                       torch.zeros_like(numerator))
