"""MetricsModel: a model that reports named metrics, accumulated on the host."""

from __future__ import annotations

from typing import Any, Dict

from ipuflow.metrics import Metric
from ipuflow.models.model import Model


class MetricsModel(Model):
    """A model holding `metrics` (name → metric): `get_metrics` reports each under its name
    (`accuracy`), or its name and suffix (`f1_fresh`), and their state is checkpointed."""

    def __init__(self, metrics: Dict[str, Metric]) -> None:
        super().__init__()
        # A plain dict, not a ModuleDict: metric state is not part of the model's weights.
        self.metrics: Dict[str, Metric] = dict(metrics)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """Each metric's values under its name (`accuracy`), or name and suffix (`f1_fresh`)."""
        values: Dict[str, float] = {}
        for name, metric in self.metrics.items():
            for suffix, value in metric.get_metric(reset).items():
                values[f"{name}_{suffix}" if suffix else name] = float(value)
        return values

    def metrics_state_dict(self) -> Dict[str, Any]:
        """Each metric's accumulated state, by the metric's name."""
        return {name: metric.state_dict() for name, metric in self.metrics.items()}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue each metric from its saved state."""
        for name, metric in self.metrics.items():
            if name in state:
                metric.load_state_dict(state[name])
