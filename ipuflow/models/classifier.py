"""Classifier: what every classification model shares (labels, loss, metrics, readable outputs)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import CategoricalAccuracy, Metric
from ipuflow.models.model import IGNORE_LABEL, Model


class Classifier(Model):
    """A model that scores the classes of the vocabulary's `label_namespace` for each row.

    Subclasses compute `logits` and call `classification_outputs`. The loss is the cross-entropy
    averaged over the rows whose label is not `IGNORE_LABEL`; `metrics` (by default
    `{"accuracy": categorical_accuracy}`) are updated on the host from the logits.
    """

    def __init__(self, vocab: Vocabulary, label_namespace: str = "labels", metrics: Optional[Dict[str, Metric]] = None) -> None:
        super().__init__()
        self.vocab = vocab
        self.label_namespace = label_namespace
        self.num_labels = vocab.get_vocab_size(label_namespace)
        if self.num_labels < 1:
            raise ConfigurationError(
                f"the vocabulary's {label_namespace!r} namespace is empty, so there are no classes to predict. Build "
                f"the vocabulary from labelled data (datasets_for_vocab_creation), or fix label_namespace.",
                key="",
            )
        # A plain dict, not a ModuleDict: metric state is not part of the model's weights.
        self.metrics: Dict[str, Metric] = dict(metrics) if metrics is not None else {"accuracy": CategoricalAccuracy()}

    def classification_outputs(self, logits: torch.Tensor, label: Optional[torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`logits`, `probs` and, given labels, the mean `loss` over the labelled rows."""
        outputs = {"logits": logits, "probs": torch.softmax(logits.float(), dim=-1)}
        if label is not None:
            per_row = torch.nn.functional.cross_entropy(
                logits.float(), label.long(), reduction="none", ignore_index=IGNORE_LABEL
            )
            # Sum over the count rather than a "mean" reduction: a batch of padding rows only then
            # gives a loss of 0 instead of NaN, without branching on tensor values.
            labelled = (label != IGNORE_LABEL).sum().clamp(min=1)
            outputs["loss"] = per_row.sum() / labelled
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

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """Each metric's values under its name (`accuracy`), or name and suffix (`f1_fresh`)."""
        values: Dict[str, float] = {}
        for name, metric in self.metrics.items():
            for suffix, value in metric.get_metric(reset).items():
                values[f"{name}_{suffix}" if suffix else name] = float(value)
        return values

    def metrics_state_dict(self) -> Dict[str, Any]:
        """Each metric's accumulated state, by the metric's name."""
        return {name: metric.state_dict() for name, metric in self.metrics.items()}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue each metric from its saved state."""
        for name, metric in self.metrics.items():
            if name in state:
                metric.load_state_dict(state[name])

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-instance lists: `label` (the most probable class's label) and `probs`."""
        probs = outputs["probs"].detach().float().cpu()
        labels = [self.vocab.get_token_from_index(index, self.label_namespace) for index in probs.argmax(dim=-1).tolist()]
        return {"label": labels, "probs": probs.tolist()}
