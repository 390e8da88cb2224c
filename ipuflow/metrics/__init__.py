"""Metrics (Registrable): `categorical_accuracy`, `f1`, `mean_absolute_error`, `perplexity` (counts
accumulated on the device in plain torch), `span_f1` (entity spans, through seqeval)."""

from ipuflow.metrics.metric import Metric
from ipuflow.metrics.categorical_accuracy import CategoricalAccuracy
from ipuflow.metrics.f1 import F1Measure
from ipuflow.metrics.mean_absolute_error import MeanAbsoluteError
from ipuflow.metrics.perplexity import Perplexity
from ipuflow.metrics.span_f1 import SpanF1

__all__ = ["Metric", "CategoricalAccuracy", "F1Measure", "MeanAbsoluteError", "Perplexity", "SpanF1"]
