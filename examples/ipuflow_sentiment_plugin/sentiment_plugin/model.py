"""The `mean_pool_classifier` model: mean of word embeddings, then a linear layer."""

from typing import Any, Dict, Mapping, Optional

import torch

from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import CategoricalAccuracy, Metric
from ipuflow.models.model import IGNORE_LABEL, Model


@Model.register("mean_pool_classifier")
class MeanPoolClassifier(Model):
    """Classifies `tokens` by the mean of their embeddings; reports `accuracy` and `balanced`."""

    default_predictor = "text_classifier"  # reads `probs` from make_output_human_readable

    def __init__(self, vocab: Vocabulary, embedding_dim: int = 64, balanced: Optional[Metric] = None) -> None:
        super().__init__()
        self.vocab = vocab  # injected; the text_classifier predictor reads label names from it
        self.embedding = torch.nn.Embedding(vocab.get_vocab_size("tokens"), embedding_dim, padding_idx=0)
        self.output = torch.nn.Linear(embedding_dim, vocab.get_vocab_size("labels"))
        # A plain dict, not a ModuleDict: metric state is not part of the weights.
        self.metrics: Dict[str, Metric] = {"accuracy": CategoricalAccuracy()}
        if balanced is not None:
            self.metrics["balanced"] = balanced

    def forward(  # type: ignore[override]
        self, tokens: torch.Tensor, tokens_mask: torch.Tensor, label: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """`logits` and `probs` per row and, given labels, the mean `loss` over the labelled rows."""
        mask = tokens_mask.unsqueeze(-1).float()
        pooled = (self.embedding(tokens) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        logits = self.output(pooled)
        outputs = {"logits": logits, "probs": torch.softmax(logits, dim=-1)}
        if label is not None:
            # Padding rows carry IGNORE_LABEL: leave them out, and never divide by zero.
            per_row = torch.nn.functional.cross_entropy(logits, label, reduction="none", ignore_index=IGNORE_LABEL)
            outputs["loss"] = per_row.sum() / (label != IGNORE_LABEL).sum().clamp(min=1)
        return outputs

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        """Accumulate every metric over the rows whose label is not padding."""
        label = batch.get("label")
        if label is None:
            return
        label = label.to(outputs["logits"].device)
        for metric in self.metrics.values():
            metric(outputs["logits"], label, label != IGNORE_LABEL)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """`accuracy` and, if configured, `balanced`."""
        return {name: metric.get_metric(reset)[""] for name, metric in self.metrics.items()}

    def metrics_state_dict(self) -> Dict[str, Any]:
        """Each metric's accumulated state, for checkpoints."""
        return {name: metric.state_dict() for name, metric in self.metrics.items()}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue each metric from a checkpoint."""
        for name, metric in self.metrics.items():
            if name in state:
                metric.load_state_dict(state[name])

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-row `label` names and `probs` lists, as the `text_classifier` predictor reads them."""
        probs = outputs["probs"].detach().cpu()
        labels = [self.vocab.get_token_from_index(i, "labels") for i in probs.argmax(dim=-1).tolist()]
        return {"label": labels, "probs": probs.tolist()}
