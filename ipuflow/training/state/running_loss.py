"""The epoch's running training loss, summed on the device so that the loop never waits for it."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch


class RunningLoss:
    """Sums the loss of each host call in place on a buffer of its own (no per-call allocation and no
    device sync); `mean()` reads it (a sync), which the trainer does only at logging points, before
    checkpoints and at epoch ends."""

    def __init__(self) -> None:
        self._total: Optional[torch.Tensor] = None
        self.calls = 0

    def reset(self) -> None:
        """Start a new epoch."""
        self._total, self.calls = None, 0

    def add(self, loss: torch.Tensor) -> None:
        """Add one host call's (mean) loss."""
        loss = loss.detach()
        if self._total is None:
            self._total = loss.float().clone()
        else:
            if self._total.device != loss.device:  # restored onto the CPU, before the first call
                self._total = self._total.to(loss.device)
            self._total.add_(loss)
        self.calls += 1

    def mean(self) -> Optional[float]:
        """The mean over the calls so far (None before the first)."""
        if self._total is None or self.calls == 0:
            return None
        return self._total.item() / self.calls

    def mean_and_last(self, last: torch.Tensor) -> Tuple[float, float]:
        """The mean so far and `last` (the latest call's loss) with one device read."""
        assert self._total is not None
        total, value = torch.stack([self._total, last.detach().float()]).tolist()
        return total / self.calls, value

    @property
    def started(self) -> bool:
        """Whether a loss was added in this epoch."""
        return self._total is not None

    def state_dict(self) -> Dict[str, Any]:
        """The sum (on the CPU) and the count."""
        total = None if self._total is None else self._total.detach().cpu().clone()
        return {"total": total, "calls": self.calls}

    def load_state_dict(self, state: Dict[str, Any], device: Any = None) -> None:
        """Restore what `state_dict` returned, onto `device`."""
        total = state["total"]
        self._total = None if total is None else total.to(device) if device is not None else total
        self.calls = state["calls"]


def is_finite(value: Optional[float]) -> bool:
    """Whether a loss read back is a number (None, nothing read yet, counts as finite)."""
    return value is None or math.isfinite(value)
