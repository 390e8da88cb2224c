"""Metrics (Registrable, wrapping torchmetrics): `categorical_accuracy`, `f1`, `mean_absolute_error`.

torchmetrics is imported only when a metric first sees a batch.
"""

from ipuflow.metrics.metric import Metric
from ipuflow.metrics.categorical_accuracy import CategoricalAccuracy
from ipuflow.metrics.f1 import F1Measure
from ipuflow.metrics.mean_absolute_error import MeanAbsoluteError

__all__ = ["Metric", "CategoricalAccuracy", "F1Measure", "MeanAbsoluteError"]
