"""The `f1` metric: F1 score, averaged or per class."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import validators
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics.metric import Metric
from ipuflow.metrics.multiclass_metric import IGNORED, MulticlassMetric

AVERAGES = ("macro", "micro", "weighted", "none")


@Metric.register("f1")
class F1Measure(MulticlassMetric):
    """F1 score over classes: `macro` (the mean over classes that occur in the gold labels or the
    predictions), `micro`, `weighted` (by support), or `none`: one value per class, keyed by the
    class's label from the vocabulary (`f1_fresh`) or, without one, its id (`f1_0`).

    The vocabulary is passed in by the model; it also gives `num_classes`.
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

    def _make(self, num_classes: int) -> Any:
        from torchmetrics.classification import MulticlassF1Score  # importing torchmetrics takes a second

        return MulticlassF1Score(num_classes, average=self.average,  # type: ignore[arg-type]  # checked in __init__
                                 ignore_index=IGNORED, validate_args=False)

    def _values(self, computed: Optional[torch.Tensor]) -> Dict[str, float]:
        if self.average != "none":
            return super()._values(computed)
        count = self.num_classes if computed is None else computed.numel()
        values = [0.0] * (count or 0) if computed is None else computed.tolist()
        return {self._class_name(index): float(value) for index, value in enumerate(values)}

    def _class_name(self, index: int) -> str:
        if self.vocab is not None and index < self.vocab.get_vocab_size(self.label_namespace):
            return self.vocab.get_token_from_index(index, self.label_namespace)
        return str(index)
