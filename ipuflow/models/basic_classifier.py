"""The `basic_classifier` model: embeddings → Seq2Vec encoder → dropout → linear."""

from __future__ import annotations

from typing import Dict, Optional

import torch

from ipuflow.config import ConfigurationError, Lazy
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric
from ipuflow.models.classifier import Classifier
from ipuflow.models.encoders import BagOfEmbeddingsEncoder, Seq2VecEncoder
from ipuflow.models.model import Model


@Model.register("basic_classifier", constructor="from_partial_objects")
class BasicClassifier(Classifier):
    """Classifies a text from its `tokens` (ids from the vocabulary's `namespace`, 0 = padding) and
    `tokens_mask`: token embeddings of `embedding_dim`, an `encoder` (`bag_of_embeddings`, `cnn`,
    `lstm`, ...) to one vector, dropout, and a linear layer to the label scores."""

    default_predictor = "text_classifier"

    def __init__(
        self,
        vocab: Vocabulary,
        embedding_dim: int,
        encoder: Seq2VecEncoder,
        dropout: float = 0.0,
        namespace: str = "tokens",
        label_namespace: str = "labels",
        metrics: Optional[Dict[str, Metric]] = None,
    ) -> None:
        super().__init__(vocab, label_namespace=label_namespace, metrics=metrics)
        if encoder.get_input_dim() != embedding_dim:
            raise ConfigurationError(
                f"model.encoder.input_dim: the encoder takes vectors of {encoder.get_input_dim()}, but "
                f"model.embedding_dim is {embedding_dim}; leave input_dim out to use embedding_dim."
            )
        self.namespace = namespace
        self.embedding = torch.nn.Embedding(vocab.get_vocab_size(namespace), embedding_dim, padding_idx=0)
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.output = torch.nn.Linear(encoder.get_output_dim(), self.num_labels)

    @classmethod
    def from_partial_objects(
        cls,
        vocab: Vocabulary,
        embedding_dim: int,
        encoder: Lazy[Seq2VecEncoder] = Lazy(BagOfEmbeddingsEncoder),
        dropout: float = 0.0,
        namespace: str = "tokens",
        label_namespace: str = "labels",
        metrics: Optional[Dict[str, Metric]] = None,
    ) -> "BasicClassifier":
        """The config constructor: the encoder's `input_dim` defaults to `embedding_dim`."""
        return cls(
            vocab,
            embedding_dim,
            encoder.construct(input_dim=embedding_dim),
            dropout=dropout,
            namespace=namespace,
            label_namespace=label_namespace,
            metrics=metrics,
        )

    def forward(  # type: ignore[override]
        self, tokens: torch.Tensor, tokens_mask: torch.Tensor, label: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """`logits` and `probs` for each row, and `loss` given labels."""
        encoded = self.encoder(self.embedding(tokens), tokens_mask.to(torch.bool))
        return self.classification_outputs(self.output(self.dropout(encoded)), label)
