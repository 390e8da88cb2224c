"""A tiny linear-regression Model and data for the trainer tests (real components, no mocks)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy
import torch

from ipuflow.data.loader import FixedShapeDataLoader
from ipuflow.metrics import MeanAbsoluteError
from ipuflow.models.model import IGNORE_LABEL, Model


class LinearRegression(Model):
    """``y = w·x + b`` with a mean-squared-error loss; dropout makes resume tests exercise the RNG."""

    def __init__(self, num_features: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(num_features, 1)
        self.dropout = torch.nn.Dropout(dropout)
        self._squared_error = 0.0
        self._count = 0
        self.mae = MeanAbsoluteError()

    def forward(self, features: torch.Tensor, target: torch.Tensor, **_: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        prediction = self.linear(self.dropout(features)).squeeze(-1)
        return {"prediction": prediction, "loss": torch.nn.functional.mse_loss(prediction, target)}

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        error = (outputs["prediction"].detach().cpu() - batch["target"]) ** 2
        self._squared_error += float(error.sum())
        self._count += int(error.numel())
        self.mae(outputs["prediction"], batch["target"])

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = {"mse": self._squared_error / self._count, "mae": self.mae.get_metric()[""]} if self._count else {}
        if reset:
            self._squared_error, self._count = 0.0, 0
            self.mae.reset()
        return metrics

    def metrics_state_dict(self) -> Dict[str, Any]:
        return {"squared_error": self._squared_error, "count": self._count, "mae": self.mae.state_dict()}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        self._squared_error, self._count = state["squared_error"], state["count"]
        self.mae.load_state_dict(state["mae"])


def regression_instances(count: int, num_features: int = 4, seed: int = 0, noise: float = 0.1) -> List[Dict[str, Any]]:
    """Indexed instances with ``features`` (a float vector) and a float ``target``."""
    weights = numpy.random.default_rng(0).normal(size=num_features)  # one true function for every split
    rng = numpy.random.default_rng(seed)
    features = rng.normal(size=(count, num_features)).astype(numpy.float32)
    targets = features @ weights + 0.5 + noise * rng.normal(size=count)
    return [{"features": features[i], "target": float(targets[i])} for i in range(count)]


def loaders(train: int = 48, validation: int = 16, batch_size: int = 4, shuffle: bool = True):
    """(training loader, validation loader) over regression data."""
    return (
        FixedShapeDataLoader(regression_instances(train, seed=1), batch_size=batch_size, shuffle=shuffle, seed=3),
        FixedShapeDataLoader(regression_instances(validation, seed=2), batch_size=batch_size, shuffle=False),
    )


__all__ = ["IGNORE_LABEL", "LinearRegression", "loaders", "regression_instances"]
