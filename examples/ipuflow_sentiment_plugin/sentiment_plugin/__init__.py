"""A worked ipuflow plugin (docs/extending.md): importing it registers its four components."""

from sentiment_plugin.callback import EpochLogCallback
from sentiment_plugin.metric import BalancedAccuracy
from sentiment_plugin.model import MeanPoolClassifier
from sentiment_plugin.reader import SentimentLinesReader

__all__ = ["EpochLogCallback", "BalancedAccuracy", "MeanPoolClassifier", "SentimentLinesReader"]
