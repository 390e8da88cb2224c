"""Predictors: how `ipuflow predict` turns JSON inputs into predictions."""

from ipuflow.predictors.classifier import ClassifierPredictor
from ipuflow.predictors.predictor import Predictor

__all__ = ["ClassifierPredictor", "Predictor"]
