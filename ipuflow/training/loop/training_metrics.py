"""What the trainer reports about training between validations: the running loss (summed on the
device), the model's own metrics when the executor returns every micro-batch's outputs, and the
learning rates."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

import torch

from ipuflow.models.model import Model
from ipuflow.training.optim.regularization import REG_LOSS, add_regularization_penalty
from ipuflow.training.state.running_loss import RunningLoss
from ipuflow.training.state.trainer_state import TrainerState


class TrainingMetrics:
    """Reads the running training metrics; the only device syncs of the loop are its reads. A NaN/inf
    loss is left out of the running loss (see `RunningLoss`) and counted (`nonfinite_losses`); every
    read checks the count in a row, and `stop_loss` (the trainer's guard) is called with it once it
    reaches `stop_after_nonfinite` (None: never)."""

    def __init__(self, model: Model, optimizer: Optional[torch.optim.Optimizer], covers_batch: bool,
                 stop_loss: Callable[[int], None], stop_after_nonfinite: Optional[int]) -> None:
        self.loss = RunningLoss()
        # A model with a regularization penalty adds it to its training loss and returns it as reg_loss.
        self.reg_loss: Optional[RunningLoss] = RunningLoss() if add_regularization_penalty(model) else None
        self._stop_loss = stop_loss
        self._stop_after_nonfinite = stop_after_nonfinite
        self._model = model
        self._optimizer = optimizer
        self.covers_batch = covers_batch
        embeddings = {id(p) for module in model.modules() if isinstance(module, torch.nn.Embedding) for p in module.parameters()}
        self._parameters_outside_embeddings = sum(p.numel() for p in model.parameters() if id(p) not in embeddings)

    def logs(self, batch_loss: Optional[torch.Tensor]) -> Dict[str, float]:
        """At a logging point: `loss` (the mean so far) and `batch_loss` (the last call's) in one read,
        the model's metrics so far (not reset), and `lr` (`lr_group<i>` for later parameter groups)."""
        logs: Dict[str, float] = {}
        if self.loss.started and batch_loss is not None:
            logs["loss"], logs["batch_loss"] = self.loss.mean_and_last(batch_loss)
            nonfinite = self.check_running_loss()
            if nonfinite:  # reported once there is one, as the count this epoch
                logs["nonfinite_losses"] = nonfinite
        if self.reg_loss is not None and self.reg_loss.started and self._last_reg_loss is not None:
            logs["reg_loss"], logs["batch_reg_loss"] = self.reg_loss.mean_and_last(self._last_reg_loss)
        if self.covers_batch:
            logs.update(self._model.get_metrics(reset=False))
        if self._optimizer is not None:
            for index, group in enumerate(self._optimizer.param_groups):
                logs["lr" if index == 0 else f"lr_group{index}"] = float(group["lr"])
        return logs

    _last_reg_loss: Optional[torch.Tensor] = None

    def add(self, loss: Optional[torch.Tensor], outputs: Any) -> None:
        """Add one host call's mean loss, and its regularization penalty (``reg_loss`` output) if any."""
        if loss is not None:
            self.loss.add(loss)
        if self.reg_loss is not None and isinstance(outputs, Mapping) and outputs.get(REG_LOSS) is not None:
            self._last_reg_loss = outputs[REG_LOSS].detach().float().mean()
            self.reg_loss.add(self._last_reg_loss)

    def count_tokens(self, state: TrainerState, batch: Mapping[str, Any], rows: int) -> None:
        """Add a training call's `rows` to `state.num_input_tokens_seen` (each token-id field, one with a
        ``<name>_mask``, counts its length, padding included) and their estimated `state.total_flos`."""
        tokens = rows * sum(int(value.shape[1]) for name, value in batch.items()
                            if f"{name}_mask" in batch and getattr(value, "dim", lambda: 0)() >= 2)
        if tokens:
            state.num_input_tokens_seen += tokens
            state.total_flos += 6.0 * tokens * self._parameters_outside_embeddings

    def reset(self) -> None:
        """Start a new epoch's running losses."""
        self.loss.reset()
        if self.reg_loss is not None:
            self.reg_loss.reset()

    def check_running_loss(self) -> int:
        """Read the count of non-finite losses (a sync) and stop if too many came in a row, e.g. before a
        checkpoint keeps these weights; the count this epoch."""
        in_all, in_a_row = self.loss.nonfinite()
        if self._stop_after_nonfinite is not None and in_a_row >= self._stop_after_nonfinite:
            self._stop_loss(in_a_row)
        return in_all

    def epoch_metrics(self, reset: bool = True) -> Dict[str, float]:
        """The epoch's training metrics: the model's (reset when `reset`) and the mean loss."""
        metrics: Dict[str, float] = dict(self._model.get_metrics(reset=reset)) if self.covers_batch else {}
        loss = self.loss.mean()
        nonfinite = self.check_running_loss()
        if loss is not None:
            metrics["loss"] = loss
        if nonfinite:
            metrics["nonfinite_losses"] = nonfinite
        reg_loss = None if self.reg_loss is None else self.reg_loss.mean()
        if reg_loss is not None:
            metrics["reg_loss"] = reg_loss
        return metrics
