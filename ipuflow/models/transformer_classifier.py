"""The `transformer_classifier` model: a Hugging Face sequence-classification transformer."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric
from ipuflow.models.classifier import Classifier
from ipuflow.models.huggingface.task import attention_mask
from ipuflow.models.huggingface.loading import load_auto_model, model_from_config
from ipuflow.models.huggingface.transformer_layout import TransformerPipelineLayout
from ipuflow.models.model import Model


@Model.register("transformer_classifier")
class TransformerClassifier(TransformerPipelineLayout, Classifier):
    """`AutoModelForSequenceClassification` over `tokens` (ids from a `pretrained_transformer`
    tokenizer) and `tokens_mask` (the attention mask), with one output per label in the vocabulary.

    Give either `model_name`, a local directory or `package://<package>/<dir>` holding pretrained
    weights (a new classification head is added), or `config`, a transformers config as a dict with
    its `model_type` (e.g. `{"model_type": "bert", "hidden_size": 64, ...}`), randomly initialised.
    Nothing is downloaded.
    """

    default_predictor = "text_classifier"

    def __init__(
        self,
        vocab: Vocabulary,
        model_name: Optional[str] = None,
        config: Optional[Dict[str, Any]] = None,
        label_namespace: str = "labels",
        metrics: Optional[Dict[str, Metric]] = None,
    ) -> None:
        super().__init__(vocab, label_namespace=label_namespace, metrics=metrics)
        if (model_name is None) == (config is None):
            raise ConfigurationError(
                "give exactly one of model_name (a local pretrained model) and config (a transformers config dict, "
                "randomly initialised).",
                key="",
            )
        self.model_name = model_name
        id2label = {index: self.vocab.get_token_from_index(index, label_namespace) for index in range(self.num_labels)}
        labels = {"num_labels": self.num_labels, "id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
        if model_name is not None:
            self.transformer = load_auto_model("AutoModelForSequenceClassification", model_name, "model_name", labels)
        else:
            self.transformer = model_from_config("AutoModelForSequenceClassification", config or {}, labels)

    def forward(  # type: ignore[override]
        self, tokens: torch.Tensor, tokens_mask: torch.Tensor, label: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """`logits` and `probs` for each row, and `loss` given labels."""
        logits = self.transformer(input_ids=tokens, attention_mask=attention_mask(tokens_mask)).logits
        return self.classification_outputs(logits, label)
