"""Span extraction: models that score, for every token, how likely the answer starts and ends there."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch

from ipuflow.config import validators
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.models.model import IGNORE_LABEL, Model

MASKED_SCORE = -1e4
"""The score of padding positions: far below any real one, yet finite in fp16, so no softmax gives NaN."""


def span_outputs(start_logits: torch.Tensor, end_logits: torch.Tensor, tokens_mask: torch.Tensor,
                 span_start: Optional[torch.Tensor], span_end: Optional[torch.Tensor]) -> Dict[str, torch.Tensor]:
    """`start_logits` and `end_logits` with padding positions masked, and, given the gold span, the
    `loss`: the mean of the start and end cross-entropies over the rows not marked `IGNORE_LABEL`."""
    mask = tokens_mask.to(torch.bool)
    start = start_logits.float().masked_fill(~mask, MASKED_SCORE)
    end = end_logits.float().masked_fill(~mask, MASKED_SCORE)
    outputs = {"start_logits": start, "end_logits": end}
    if span_start is not None and span_end is not None:
        # Summed over a clamped count rather than "mean"-reduced, so a batch of padding rows gives 0, not NaN.
        labelled = (span_start != IGNORE_LABEL).sum().clamp(min=1)
        start_loss = torch.nn.functional.cross_entropy(start, span_start.long(), reduction="none", ignore_index=IGNORE_LABEL)
        end_loss = torch.nn.functional.cross_entropy(end, span_end.long(), reduction="none", ignore_index=IGNORE_LABEL)
        outputs["loss"] = (start_loss.sum() + end_loss.sum()) / (2 * labelled)
    return outputs


class SpanExtractionModel(Model):
    """A model with `span_outputs` (such as for extractive QA with the `squad` reader and the
    `squad_answers` postprocessor): it keeps `span_accuracy`, the share of labelled windows whose
    most likely start and end are both the gold ones; the answers' exact match and F1 come from the
    postprocessor."""

    default_predictor = "question_answering"

    def __init__(self) -> None:
        super().__init__()
        self._correct = 0
        self._total = 0

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        """Count the labelled rows whose predicted start and end are both right."""
        span_start, span_end = batch.get("span_start"), batch.get("span_end")
        if span_start is None or span_end is None:
            return
        labelled = span_start != IGNORE_LABEL
        right = (outputs["start_logits"].argmax(-1).cpu() == span_start) & (outputs["end_logits"].argmax(-1).cpu() == span_end)
        self._correct += int((right & labelled).sum())
        self._total += int(labelled.sum())

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """`span_accuracy` (when any labelled window was seen)."""
        metrics = {"span_accuracy": self._correct / self._total} if self._total else {}
        if reset:
            self._correct = self._total = 0
        return metrics

    def metrics_state_dict(self) -> Dict[str, Any]:
        """The counts behind `span_accuracy`."""
        return {"correct": self._correct, "total": self._total}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue counting from `metrics_state_dict`'s counts."""
        self._correct, self._total = int(state.get("correct", 0)), int(state.get("total", 0))

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-row lists of `start_logits` and `end_logits` (what `squad_answers` reads)."""
        return {"start_logits": outputs["start_logits"].detach().float().cpu().tolist(),
                "end_logits": outputs["end_logits"].detach().float().cpu().tolist()}


@Model.register("span_extractor")
class SpanExtractor(SpanExtractionModel):
    """Extractive QA without a pretrained transformer: token embeddings (`num_embeddings` ids, e.g.
    the tokenizer's vocabulary size, 30522 for MiniLM's) plus segment embeddings (question 0,
    context 1), a bidirectional LSTM of `hidden_size` per direction (`num_layers`), dropout, and a
    linear layer to a start and an end score per token."""

    def __init__(self, vocab: Vocabulary, num_embeddings: int, embedding_dim: int = 64, hidden_size: int = 64,
                 num_layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        validators.positive_int("num_embeddings", num_embeddings)
        validators.positive_int("embedding_dim", embedding_dim)
        validators.positive_int("hidden_size", hidden_size)
        validators.positive_int("num_layers", num_layers)
        validators.probability("dropout", dropout)
        self.embedding = torch.nn.Embedding(num_embeddings, embedding_dim, padding_idx=0)
        self.segments = torch.nn.Embedding(2, embedding_dim)
        self.encoder = torch.nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True,
                                     bidirectional=True)
        self.dropout = torch.nn.Dropout(dropout)
        self.scores = torch.nn.Linear(2 * hidden_size, 2)

    def forward(  # type: ignore[override]
        self, tokens: torch.Tensor, tokens_mask: torch.Tensor, type_ids: Optional[torch.Tensor] = None,
        type_ids_mask: Optional[torch.Tensor] = None, span_start: Optional[torch.Tensor] = None,
        span_end: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """Start and end scores per token, and the span `loss` given the gold span."""
        embedded = self.embedding(tokens)
        if type_ids is not None:
            embedded = embedded + self.segments(type_ids.clamp(0, 1))
        encoded, _ = self.encoder(embedded)
        start, end = self.scores(self.dropout(encoded)).unbind(dim=-1)
        return span_outputs(start, end, tokens_mask, span_start, span_end)
