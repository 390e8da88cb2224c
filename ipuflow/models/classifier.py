"""Classifier: what every classification model shares (labels, loss, metrics, readable outputs)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import CategoricalAccuracy, Metric
from ipuflow.models.losses import masked_cross_entropy
from ipuflow.models.metrics_model import MetricsModel
from ipuflow.models.model import IGNORE_LABEL


class Classifier(MetricsModel):
    """A model that scores the classes of the vocabulary's `label_namespace` for each row.

    Subclasses compute `logits` and call `classification_outputs`. The loss is the cross-entropy
    averaged over the rows whose label is not `IGNORE_LABEL`; `metrics` (by default
    `{"accuracy": categorical_accuracy}`) are updated on the host from the logits.
    """

    def __init__(self, vocab: Vocabulary, label_namespace: str = "labels", metrics: Optional[Dict[str, Metric]] = None) -> None:
        super().__init__(metrics if metrics is not None else {"accuracy": CategoricalAccuracy()})
        self.vocab = vocab
        self.label_namespace = label_namespace
        self.num_labels = vocab.get_vocab_size(label_namespace)
        if self.num_labels < 1:
            raise ConfigurationError(
                f"the vocabulary's {label_namespace!r} namespace is empty, so there are no classes to predict. Build "
                f"the vocabulary from labelled data (datasets_for_vocab_creation), or fix label_namespace.",
                key="",
            )

    def classification_outputs(self, logits: torch.Tensor, label: Optional[torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`logits`, `probs` and, given labels, the mean `loss` over the labelled rows."""
        outputs = {"logits": logits, "probs": torch.softmax(logits.float(), dim=-1)}
        if label is not None:
            outputs["loss"] = masked_cross_entropy(logits, label)
        return outputs

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        """Accumulate every metric over the rows of `batch` whose label is not `IGNORE_LABEL`."""
        label = batch.get("label")
        if label is None:
            return
        logits = outputs["logits"]
        label = label.to(logits.device, non_blocking=True)
        mask = label != IGNORE_LABEL
        for metric in self.metrics.values():
            metric(logits, label, mask)

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-instance lists: `label` (the most probable class's label) and `probs`."""
        probs = outputs["probs"].detach().float().cpu()
        labels = [self.vocab.get_token_from_index(index, self.label_namespace) for index in probs.argmax(dim=-1).tolist()]
        return {"label": labels, "probs": probs.tolist()}
