"""Running a model over a dataset with an inference executor: metrics and per-instance outputs."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import torch

from ipuflow.models.model import IGNORE_LABEL


def _real_rows(batch: Mapping[str, Any]) -> Optional[torch.Tensor]:
    """Rows that carry a real target (padding rows have IGNORE_LABEL), or None without targets."""
    label = batch.get("label")
    if isinstance(label, torch.Tensor) and label.dtype in (torch.int64, torch.int32):
        return label != IGNORE_LABEL
    return None


def evaluate(
    model: Any,
    executor: Any,
    batches: Iterable[Mapping[str, torch.Tensor]],
    on_outputs: Optional[Callable[[Mapping[str, Any], Mapping[str, torch.Tensor]], None]] = None,
) -> Dict[str, float]:
    """The model's metrics over `batches` plus the mean loss where targets are present.

    `executor` is an inference executor (output mode `all`), so the outputs cover every row and
    metrics are exact. `on_outputs(outputs, batch)` sees each call's outputs (e.g. to write
    predictions). The loss is summed on the device and read once at the end.
    """
    model.get_metrics(reset=True)
    loss_sum: Optional[torch.Tensor] = None
    rows = 0
    for batch in batches:
        result = executor(batch)
        model.update_metrics(result.outputs, batch)
        if on_outputs is not None:
            on_outputs(result.outputs, batch)
        real = _real_rows(batch)
        if result.loss is not None and real is not None:
            count = int(real.sum())  # the batch is on the host: no device sync
            if count:
                weighted = result.loss.detach().float() * count
                loss_sum = weighted if loss_sum is None else loss_sum + weighted
                rows += count
    metrics = dict(model.get_metrics(reset=True))
    if loss_sum is not None and rows:
        metrics["loss"] = float(loss_sum) / rows
    return metrics


def split_rows(outputs: Mapping[str, Any], count: int) -> List[Dict[str, Any]]:
    """Per-row dicts from batched outputs: tensors with dim 0 == `count` are split, others dropped."""
    rows: List[Dict[str, Any]] = [{} for _ in range(count)]
    for key, value in outputs.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == count:
            for index, item in enumerate(value.detach().cpu()):
                rows[index][key] = item
        elif isinstance(value, list) and len(value) == count:
            for index, item in enumerate(value):
                rows[index][key] = item
    return rows
