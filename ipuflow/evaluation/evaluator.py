"""Running a model over a dataset with an inference executor: metrics and per-instance outputs."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import torch

from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.distributed import current
from ipuflow.distributed.collectives import all_reduce_sum


def real_rows(batch: Mapping[str, Any]) -> torch.Tensor:
    """A bool mask of the rows of a combined batch that are not padding (the loader sets every int
    scalar field of a padding row to IGNORE_LABEL); all True when the batch has no such field. The
    batch is on the host, so this does not synchronise the device."""
    for value in batch.values():
        if isinstance(value, torch.Tensor) and value.dim() == 1 and value.dtype in (torch.int64, torch.int32):
            return value != IGNORE_LABEL
    return torch.ones(next(iter(batch.values())).shape[0], dtype=torch.bool)


def _summed_loss(result: Any, real: torch.Tensor) -> Optional[torch.Tensor]:
    """The sum of the per-row losses of the real rows of one call, on the device.

    With output mode `all` the outputs hold one loss per micro-batch (a mean over its real rows),
    so weighting each by its real rows is exact even when padding fills whole micro-batches;
    otherwise the call's mean loss is weighted by all its real rows.
    """
    per_slot = result.outputs.get("loss")
    if isinstance(per_slot, torch.Tensor) and per_slot.dim() == 1 and real.shape[0] % per_slot.shape[0] == 0:
        counts = real.view(per_slot.shape[0], -1).sum(dim=1).to(per_slot.device, non_blocking=True)
        return (per_slot.detach().float() * counts).sum()
    if result.loss is None:
        return None
    return result.loss.detach().float() * int(real.sum())


def evaluate(
    model: Any,
    executor: Any,
    batches: Iterable[Mapping[str, torch.Tensor]],
    on_outputs: Optional[Callable[[Mapping[str, Any], Mapping[str, torch.Tensor]], None]] = None,
) -> Dict[str, float]:
    """The model's metrics over `batches` plus the mean loss over the real (not padding) rows.

    `executor` is an inference executor (output mode `all`), so the outputs cover every row and
    metrics are exact. `on_outputs(outputs, batch)` sees each call's outputs (e.g. to write
    predictions). The loss is summed on the device and read once at the end. Under torchrun each
    rank scores its replica's rows and the figures are those of all rows (every rank calls this).
    """
    model.get_metrics(reset=True)
    loss_sum: Optional[torch.Tensor] = None
    rows = 0
    for batch in batches:
        result = executor(batch)
        model.update_metrics(result.outputs, batch)
        if on_outputs is not None:
            on_outputs(result.outputs, batch)
        real = real_rows(batch)
        count = int(real.sum())
        summed = _summed_loss(result, real) if count else None
        if summed is not None:
            loss_sum = summed if loss_sum is None else loss_sum.add_(summed)
            rows += count
    metrics = dict(model.get_metrics(reset=True))  # under torchrun the metrics' states are summed over ranks
    if current() is not None:
        # Each rank scored its replica's rows: the loss is the sum over every rank's real rows.
        device = loss_sum.device if loss_sum is not None else current().device  # type: ignore[union-attr]
        totals = torch.stack([loss_sum.double() if loss_sum is not None else torch.zeros((), dtype=torch.float64, device=device),
                              torch.tensor(float(rows), dtype=torch.float64, device=device)])
        loss_total, total_rows = all_reduce_sum(totals).tolist()
        return {**metrics, "loss": loss_total / total_rows} if total_rows else metrics
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
