"""Scoring a model on a dataset through an inference executor, with optional post-processing."""

from ipuflow.evaluation.evaluator import evaluate
from ipuflow.evaluation.grouped_vote import GroupedVote
from ipuflow.evaluation.postprocessor import Postprocessor

__all__ = ["GroupedVote", "Postprocessor", "evaluate"]
