"""The `feedforward_classifier` model: a multi-layer perceptron over a feature vector."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch

from ipuflow.config import validators
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric
from ipuflow.models.activations import activation_by_name
from ipuflow.models.classifier import Classifier
from ipuflow.models.model import Model


@Model.register("feedforward_classifier")
class FeedforwardClassifier(Classifier):
    """Classifies `features` `[batch, input_dim]`: for each of `hidden_dims` a linear layer, the
    `activation` and dropout, then a linear layer to the label scores."""

    default_predictor = "tensor_classifier"

    def __init__(
        self,
        vocab: Vocabulary,
        input_dim: int,
        hidden_dims: Sequence[int] = (64,),
        activation: str = "relu",
        dropout: float = 0.0,
        label_namespace: str = "labels",
        metrics: Optional[Dict[str, Metric]] = None,
    ) -> None:
        super().__init__(vocab, label_namespace=label_namespace, metrics=metrics)
        validators.positive_int("input_dim", input_dim)
        for index, dim in enumerate(hidden_dims):
            validators.positive_int(f"hidden_dims.{index}", dim)
        validators.probability("dropout", dropout)
        layers: List[torch.nn.Module] = []
        size = input_dim
        for hidden in hidden_dims:
            layers += [
                torch.nn.Linear(size, hidden),
                activation_by_name(activation, "activation"),
                torch.nn.Dropout(dropout),
            ]
            size = hidden
        layers.append(torch.nn.Linear(size, self.num_labels))
        self.layers = torch.nn.Sequential(*layers)

    def forward(  # type: ignore[override]
        self, features: torch.Tensor, label: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """`logits` and `probs` for each row, and `loss` given labels."""
        return self.classification_outputs(self.layers(features), label)
