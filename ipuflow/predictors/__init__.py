"""Predictors: how `ipuflow predict` turns JSON inputs into predictions."""

from ipuflow.predictors.classifier import ClassifierPredictor
from ipuflow.predictors.language_model import LanguageModelPredictor
from ipuflow.predictors.predictor import Predictor
from ipuflow.predictors.question_answering import QuestionAnsweringPredictor
from ipuflow.predictors.seq2seq import Seq2SeqPredictor
from ipuflow.predictors.sequence_tagger import SequenceTaggerPredictor

__all__ = ["ClassifierPredictor", "LanguageModelPredictor", "Predictor", "QuestionAnsweringPredictor", "Seq2SeqPredictor", "SequenceTaggerPredictor"]
