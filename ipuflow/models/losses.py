"""Losses that models share."""

from __future__ import annotations

import torch

from ipuflow.data.collate import IGNORE_LABEL


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """The cross-entropy of `logits` [..., classes] against `labels` [...], averaged over the labels
    that are not `IGNORE_LABEL`; `label_smoothing` as torch's (Hugging Face's `label_smoothing_factor`).

    Summed and divided by the count rather than a "mean" reduction: a batch with no label (padding
    rows only) then gives 0 instead of NaN, without branching on tensor values.
    """
    classes = logits.shape[-1]
    flat_labels = labels.reshape(-1).long()
    per_item = torch.nn.functional.cross_entropy(
        logits.reshape(-1, classes).float(), flat_labels, reduction="none", ignore_index=IGNORE_LABEL,
        label_smoothing=label_smoothing,
    )
    labelled = (flat_labels != IGNORE_LABEL).sum().clamp(min=1)
    return per_item.sum() / labelled
