"""Postprocessor: maps raw model outputs back to predictions on the original examples."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ipuflow.config import Registrable


class Postprocessor(Registrable):
    """Turns per-instance raw outputs into the predictions that metrics are computed on.

    Extractive-QA style models split one example into several features; a postprocessor receives
    every instance's outputs together with the original instances and returns one prediction per
    example. A config's top-level ``postprocessor`` runs at every validation, on the test set, in
    `ipuflow evaluate` and in `ipuflow predict`.
    """

    def __call__(self, outputs: List[Dict[str, Any]], instances: Sequence[Any]) -> List[Dict[str, Any]]:
        """Predictions (dicts) from per-instance `outputs` and the `instances` they came from."""
        raise NotImplementedError

    def metric_names(self) -> List[str]:
        """The names of the metrics `metrics` gives (what `validation_metric` may name)."""
        return []

    def metrics(self, predictions: List[Dict[str, Any]], instances: Sequence[Any]) -> Dict[str, float]:
        """Metrics of `predictions` against the gold answers in `instances`."""
        raise NotImplementedError
