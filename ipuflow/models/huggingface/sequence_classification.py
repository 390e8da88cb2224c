"""The `sequence_classification` task: one label per text (`AutoModelForSequenceClassification`)."""

from __future__ import annotations

from typing import Any, Dict, Mapping

import torch

from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.metrics import CategoricalAccuracy, Metric
from ipuflow.models.huggingface.task import HuggingfaceTask
from ipuflow.models.losses import masked_cross_entropy


@HuggingfaceTask.register("sequence_classification")
class SequenceClassificationTask(HuggingfaceTask):
    """Texts (`tokens`) to a `label` of the vocabulary's label namespace: outputs `logits`,
    `probs`, `predictions` (the label id) and, with labels, the cross-entropy `loss`."""

    auto_class = "AutoModelForSequenceClassification"
    default_predictor = "text_classifier"

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`logits`, `probs`, `predictions` and, given labels, `loss`."""
        logits = model_outputs.logits
        outputs = {"logits": logits, "probs": torch.softmax(logits.float(), dim=-1), "predictions": logits.argmax(dim=-1)}
        label = batch.get("label")
        if label is not None:
            outputs["loss"] = masked_cross_entropy(logits, label, self.label_smoothing)
        return outputs

    def default_metrics(self) -> Dict[str, Metric]:
        """`accuracy`."""
        return {"accuracy": CategoricalAccuracy()}

    def update_metrics(self, metrics: Mapping[str, Metric], outputs: Mapping[str, torch.Tensor],
                       batch: Mapping[str, Any]) -> None:
        """Every metric over the rows whose label is not `IGNORE_LABEL`."""
        label = batch.get("label")
        if label is None:
            return
        logits = outputs["logits"]
        label = label.to(logits.device, non_blocking=True)
        for metric in metrics.values():
            metric(logits, label, label != IGNORE_LABEL)

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """`label` (the most probable one) and `probs` per row."""
        probs = outputs["probs"].detach().float().cpu()
        names = self.label_names()
        return {"label": [names[index] for index in probs.argmax(dim=-1).tolist()], "probs": probs.tolist()}
