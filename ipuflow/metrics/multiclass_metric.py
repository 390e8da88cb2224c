"""The shared part of classification metrics that wrap a torchmetrics multiclass metric."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import validators
from ipuflow.metrics.metric import Metric

# The gold value that the wrapped torchmetrics metric ignores. Every negative gold label (such as
# the -100 that marks rows padded onto the batch axis) and every masked row is turned into it.
IGNORED = -1


class MulticlassMetric(Metric):
    """A metric over class predictions: scores `[..., num_classes]` (or class ids `[...]`) against
    gold class ids `[...]`. Rows with a negative gold label or a false `mask` are skipped.

    The torchmetrics object is made on the first batch (so `num_classes` can come from the scores'
    last dimension) on the predictions' device, so accumulating needs no host-device copy.
    """

    def __init__(self, num_classes: Optional[int] = None) -> None:
        validators.positive_int("num_classes", num_classes, optional=True)
        self.num_classes = num_classes
        self._metric: Any = None
        self._updates = 0

    def _make(self, num_classes: int) -> Any:
        """The torchmetrics metric for `num_classes` classes, ignoring gold label `IGNORED`."""
        raise NotImplementedError

    def _persistent_metric(self, num_classes: int) -> Any:
        metric = self._make(num_classes)
        metric.persistent(True)  # its accumulated state then travels in its state_dict
        return metric

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch of predictions."""
        predictions, gold = predictions.detach(), gold.detach()
        scores = predictions.is_floating_point()
        if (predictions.dim() != gold.dim() + 1) if scores else (predictions.shape != gold.shape):
            raise ValueError(
                f"{type(self).__name__} expects scores [..., classes] or class ids shaped like the gold "
                f"labels {tuple(gold.shape)}; got {tuple(predictions.shape)} ({predictions.dtype})."
            )
        if self._metric is None:
            num_classes = self.num_classes or (predictions.shape[-1] if scores else None)
            if num_classes is None:
                raise ValueError(f"{type(self).__name__} needs num_classes to take class ids as predictions.")
            self.num_classes = num_classes
            self._metric = self._persistent_metric(num_classes)
        if self._metric.device != predictions.device:
            self._metric = self._metric.to(predictions.device)
        keep = gold >= 0 if mask is None else (gold >= 0) & mask.to(torch.bool)
        gold = torch.where(keep, gold, torch.full_like(gold, IGNORED))
        flat = predictions.reshape(-1, predictions.shape[-1]) if scores else predictions.reshape(-1)
        self._metric.update(flat, gold.reshape(-1))
        self._updates += 1

    def _computed(self) -> Optional[torch.Tensor]:
        if self._metric is None or self._updates == 0:
            return None
        return self._metric.compute()

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The accumulated value(s)."""
        values = self._values(self._computed())
        if reset:
            self.reset()
        return values

    def _values(self, computed: Optional[torch.Tensor]) -> Dict[str, float]:
        return {"": 0.0 if computed is None else float(computed)}

    def reset(self) -> None:
        """Forget everything accumulated."""
        self._updates = 0
        if self._metric is not None:
            self._metric.reset()

    def state_dict(self) -> Dict[str, Any]:
        """The class count, the number of batches and the torchmetrics state, on the CPU."""
        if self._metric is None:
            return {"num_classes": self.num_classes, "updates": 0}
        tensors = {key: value.detach().cpu() for key, value in self._metric.state_dict().items()}
        return {"num_classes": self.num_classes, "updates": self._updates, "state": tensors}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state_dict`'s result."""
        self.num_classes = state["num_classes"]
        self._updates = state["updates"]
        if "state" in state:
            self._metric = self._persistent_metric(self.num_classes)
            self._metric.load_state_dict(state["state"])
        elif self._metric is not None:
            self._metric.reset()
