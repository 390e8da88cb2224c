"""The `huggingface` model and its tasks (`token_classification`, `sequence_classification`,
`question_answering`, `causal_lm`, `masked_lm`)."""

from ipuflow.models.huggingface.task import HuggingfaceTask
from ipuflow.models.huggingface.sequence_classification import SequenceClassificationTask
from ipuflow.models.huggingface.token_classification import TokenClassificationTask
from ipuflow.models.huggingface.question_answering import QuestionAnsweringTask
from ipuflow.models.huggingface.language_modelling import CausalLanguageModellingTask, MaskedLanguageModellingTask
from ipuflow.models.huggingface.model import HuggingfaceModel

__all__ = ["HuggingfaceTask", "SequenceClassificationTask", "TokenClassificationTask", "QuestionAnsweringTask",
           "CausalLanguageModellingTask", "MaskedLanguageModellingTask",
           "HuggingfaceModel"]
