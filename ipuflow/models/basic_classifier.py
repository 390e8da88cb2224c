"""The `basic_classifier` model: embeddings → Seq2Vec encoder → dropout → linear."""

from __future__ import annotations

from typing import Dict, Optional

import torch

from ipuflow.config import ConfigurationError, Lazy, validators
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric
from ipuflow.models.classifier import Classifier
from ipuflow.models.encoders import BagOfEmbeddingsEncoder, Seq2VecEncoder
from ipuflow.models.model import Model
from ipuflow.models.word_vectors import pretrained_embedding_matrix


@Model.register("basic_classifier", constructor="from_partial_objects")
class BasicClassifier(Classifier):
    """Classifies a text from its `tokens` (ids from the vocabulary's `namespace`, 0 = padding) and
    `tokens_mask`: token embeddings of `embedding_dim`, an `encoder` (`bag_of_embeddings`, `cnn`,
    `lstm`, ...) to one vector, dropout, and a linear layer to the label scores.

    `pretrained_file` starts the embeddings from a local file of word vectors in GloVe's text
    format (AllenNLP's `token_embedders.tokens.pretrained_file`); `trainable_embeddings: false`
    keeps them fixed (AllenNLP's `trainable`).

    With `text_pair: true` it classifies a pair of texts (premise/hypothesis, question/context)
    from `tokens` and `tokens_pair` (as a reader's `text_pair_key` gives): both are encoded by the
    same encoder into u and v, and [u; v; |u - v|; u * v] is classified."""

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
        text_pair: bool = False,
        pretrained_file: Optional[str] = None,
        trainable_embeddings: bool = True,
    ) -> None:
        super().__init__(vocab, label_namespace=label_namespace, metrics=metrics)
        if encoder.get_input_dim() != embedding_dim:
            raise ConfigurationError(
                f"the encoder takes vectors of {encoder.get_input_dim()}, but embedding_dim (next to encoder) is "
                f"{embedding_dim}; leave input_dim out to use embedding_dim.",
                key="encoder.input_dim",
            )
        validators.probability("dropout", dropout)
        self.namespace = namespace
        self.embedding = torch.nn.Embedding(vocab.get_vocab_size(namespace), embedding_dim, padding_idx=0)
        if pretrained_file is not None:
            with torch.no_grad():
                self.embedding.weight.copy_(pretrained_embedding_matrix(
                    pretrained_file, vocab.get_token_to_index_vocabulary(namespace), *self.embedding.weight.shape))
        self.embedding.weight.requires_grad_(validators.boolean("trainable_embeddings", trainable_embeddings))
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.text_pair = text_pair
        self.output = torch.nn.Linear(encoder.get_output_dim() * (4 if text_pair else 1), self.num_labels)

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
        text_pair: bool = False,
        pretrained_file: Optional[str] = None,
        trainable_embeddings: bool = True,
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
            text_pair=text_pair,
            pretrained_file=pretrained_file,
            trainable_embeddings=trainable_embeddings,
        )

    def forward(  # type: ignore[override]
        self,
        tokens: torch.Tensor,
        tokens_mask: torch.Tensor,
        label: Optional[torch.Tensor] = None,
        tokens_pair: Optional[torch.Tensor] = None,
        tokens_pair_mask: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """`logits` and `probs` for each row, and `loss` given labels."""
        encoded = self.encoder(self.embedding(tokens), tokens_mask.to(torch.bool))
        if self.text_pair:
            if tokens_pair is None or tokens_pair_mask is None:
                raise ValueError("A basic_classifier with text_pair needs `tokens_pair` batches: set the reader's "
                                 "text_pair_key (or text_pair_column).")
            paired = self.encoder(self.embedding(tokens_pair), tokens_pair_mask.to(torch.bool))
            encoded = torch.cat([encoded, paired, (encoded - paired).abs(), encoded * paired], dim=-1)
        return self.classification_outputs(self.output(self.dropout(encoded)), label)
