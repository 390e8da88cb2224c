"""The `categorical_accuracy` metric."""

from __future__ import annotations

from typing import Any, Optional

from ipuflow.config import validators
from ipuflow.metrics.metric import Metric
from ipuflow.metrics.multiclass_metric import IGNORED, MulticlassMetric


@Metric.register("categorical_accuracy")
class CategoricalAccuracy(MulticlassMetric):
    """The fraction of rows whose gold class is among the `top_k` highest-scoring classes."""

    def __init__(self, top_k: int = 1, num_classes: Optional[int] = None) -> None:
        validators.positive_int("top_k", top_k)
        super().__init__(num_classes=num_classes)
        self.top_k = top_k

    def _make(self, num_classes: int) -> Any:
        from torchmetrics.classification import MulticlassAccuracy  # importing torchmetrics takes a second

        return MulticlassAccuracy(
            num_classes, top_k=self.top_k, average="micro", ignore_index=IGNORED, validate_args=False
        )
