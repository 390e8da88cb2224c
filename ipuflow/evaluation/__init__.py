"""Scoring a model on a dataset through an inference executor, with optional post-processing."""

from ipuflow.evaluation.evaluator import evaluate
from ipuflow.evaluation.grouped_vote import GroupedVote
from ipuflow.evaluation.postprocessor import Postprocessor
from ipuflow.evaluation.squad_answers import SquadAnswers
from ipuflow.evaluation.generation_scores import GenerationScores

__all__ = ["GenerationScores", "GroupedVote", "Postprocessor", "SquadAnswers", "evaluate"]
