"""The `balanced_accuracy` metric: the mean over classes of each class's recall."""

from typing import Dict, Optional

import torch

from ipuflow.metrics import Metric


@Metric.register("balanced_accuracy")
class BalancedAccuracy(Metric):
    """Mean per-class recall of the arg-max predictions; classes never seen as gold are left out."""

    def __init__(self) -> None:
        # Tensors (or plain numbers) only: the default state_dict checkpoints them for resume.
        self.correct = torch.zeros(0)
        self.total = torch.zeros(0)

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Count, per gold class, the rows and the correct arg-max predictions (rows where `mask` is false skipped)."""
        classes = predictions.shape[-1]
        if self.total.numel() != classes:
            self.correct = torch.zeros(classes, device=predictions.device)
            self.total = torch.zeros(classes, device=predictions.device)
        keep = torch.ones_like(gold, dtype=torch.bool) if mask is None else mask
        gold = gold.clamp(min=0)  # padding rows (-100) are masked out below; clamp keeps the index valid
        hits = (predictions.argmax(dim=-1) == gold) & keep
        self.total += torch.bincount(gold[keep], minlength=classes)[:classes]
        self.correct += torch.bincount(gold[hits], minlength=classes)[:classes]

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The mean recall under the main key `""` (this reads the device once)."""
        seen = self.total > 0
        value = float((self.correct[seen] / self.total[seen]).mean()) if bool(seen.any()) else 0.0
        if reset:
            self.reset()
        return {"": value}

    def reset(self) -> None:
        """Forget every count."""
        self.correct = torch.zeros(0)
        self.total = torch.zeros(0)
