"""Running a model over a dataset with an inference executor: metrics and per-instance outputs."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import torch

from ipuflow.models.model import IGNORE_LABEL


def real_row_count(batch: Mapping[str, Any]) -> int:
    """Rows of a combined batch that are not padding (the loader sets every int scalar field of a
    padding row to IGNORE_LABEL); every row when the batch has no int scalar field. The batch is on
    the host, so counting does not synchronise the device."""
    for value in batch.values():
        if isinstance(value, torch.Tensor) and value.dim() == 1 and value.dtype in (torch.int64, torch.int32):
            return int((value != IGNORE_LABEL).sum())
    return int(next(iter(batch.values())).shape[0])


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
        count = real_row_count(batch)
        if result.loss is not None and count:
            weighted = result.loss.detach().float() * count
            loss_sum = weighted if loss_sum is None else loss_sum.add_(weighted)
            rows += count
    metrics = dict(model.get_metrics(reset=True))
    if loss_sum is not None and rows:
        metrics["loss"] = loss_sum.item() / rows
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
