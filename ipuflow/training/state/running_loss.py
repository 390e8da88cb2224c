"""The epoch's running training loss, summed on the device so that the loop never waits for it."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch


class RunningLoss:
    """Sums the loss of each host call in place on a buffer of its own (no device sync); `mean()`
    reads it (a sync), which the trainer does only at logging points, before checkpoints and at
    epoch ends.

    A NaN/inf loss is filtered as the Hugging Face Trainer's `logging_nan_inf_filter` does: it adds the
    mean of the losses so far instead, so that the running loss stays finite; the non-finite losses
    are counted, in all and in a row (`nonfinite`), on the device too.
    """

    def __init__(self) -> None:
        self._total: Optional[torch.Tensor] = None
        self._nonfinite: Optional[torch.Tensor] = None  # [in all, in a row]
        self.calls = 0

    def reset(self) -> None:
        """Start a new epoch (the count of non-finite losses in a row goes on)."""
        self._total, self.calls = None, 0
        if self._nonfinite is not None:
            self._nonfinite[0].zero_()

    def add(self, loss: torch.Tensor) -> None:
        """Add one host call's (mean) loss, or the mean so far in place of a non-finite one."""
        loss = loss.detach().float()
        if self._total is None:
            self._total = torch.zeros((), device=loss.device)
        if self._nonfinite is None:
            self._nonfinite = torch.zeros(2, device=loss.device)
        if self._total.device != loss.device:  # restored onto the CPU, before the first call
            self._total, self._nonfinite = self._total.to(loss.device), self._nonfinite.to(loss.device)
        finite = torch.isfinite(loss)
        self._total.add_(torch.where(finite, loss, self._total / max(self.calls, 1)))
        nonfinite = (~finite).float()
        self._nonfinite[0].add_(nonfinite)
        self._nonfinite[1].mul_(nonfinite).add_(nonfinite)  # a finite loss ends the run of non-finite ones
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

    def nonfinite(self) -> Tuple[int, int]:
        """(non-finite losses this epoch, non-finite losses in a row up to the latest call): a device read."""
        if self._nonfinite is None:
            return 0, 0
        in_all, in_a_row = self._nonfinite.tolist()
        return int(in_all), int(in_a_row)

    @property
    def started(self) -> bool:
        """Whether a loss was added in this epoch."""
        return self._total is not None

    def state_dict(self) -> Dict[str, Any]:
        """The sum and the non-finite counts (on the CPU), and the count of calls."""
        total = None if self._total is None else self._total.detach().cpu().clone()
        nonfinite = None if self._nonfinite is None else self._nonfinite.detach().cpu().clone()
        return {"total": total, "calls": self.calls, "nonfinite": nonfinite}

    def load_state_dict(self, state: Dict[str, Any], device: Any = None) -> None:
        """Restore what `state_dict` returned, onto `device`."""
        total, nonfinite = state["total"], state.get("nonfinite")
        self._total = None if total is None else total.to(device) if device is not None else total
        self._nonfinite = None if nonfinite is None else nonfinite.to(device) if device is not None else nonfinite
        self.calls = state["calls"]
