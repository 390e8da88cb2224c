"""Models: the `Model` base and the built-in classifiers, encoders registered on import.

`basic_classifier`, `feedforward_classifier`, `transformer_classifier` (which imports transformers
only when it is built).
"""

from ipuflow.models.model import IGNORE_LABEL, Model
from ipuflow.models.encoders import BagOfEmbeddingsEncoder, CnnEncoder, LstmEncoder, Seq2VecEncoder
from ipuflow.models.classifier import Classifier
from ipuflow.models.basic_classifier import BasicClassifier
from ipuflow.models.feedforward_classifier import FeedforwardClassifier
from ipuflow.models.transformer_classifier import TransformerClassifier

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
]
