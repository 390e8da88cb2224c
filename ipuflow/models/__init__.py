"""Models: the `Model` base and the built-in classifiers, encoders registered on import.

`basic_classifier`, `feedforward_classifier`, `transformer_classifier` and `huggingface` (which
import transformers only when they are built), `span_extractor` (extractive QA), `seq2seq_generator`.
"""

from ipuflow.models.model import IGNORE_LABEL, Model
from ipuflow.models.encoders import BagOfEmbeddingsEncoder, CnnEncoder, LstmEncoder, Seq2VecEncoder
from ipuflow.models.classifier import Classifier
from ipuflow.models.basic_classifier import BasicClassifier
from ipuflow.models.feedforward_classifier import FeedforwardClassifier
from ipuflow.models.transformer_classifier import TransformerClassifier
from ipuflow.models.huggingface import HuggingfaceModel, HuggingfaceTask
from ipuflow.models.span_extraction import SpanExtractionModel, SpanExtractor
from ipuflow.models.seq2seq_generator import Seq2SeqGenerator

__all__ = [
    "IGNORE_LABEL",
    "Model",
    "Seq2VecEncoder",
    "BagOfEmbeddingsEncoder",
    "CnnEncoder",
    "LstmEncoder",
    "Classifier",
    "BasicClassifier",
    "FeedforwardClassifier",
    "TransformerClassifier",
    "HuggingfaceModel",
    "HuggingfaceTask",
    "SpanExtractionModel",
    "SpanExtractor",
    "Seq2SeqGenerator",
]
