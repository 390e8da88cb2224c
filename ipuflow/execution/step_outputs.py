"""Finding a model's loss and reducing per-micro-batch outputs by the output mode."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution.ipu_ops import IDENTITY_LOSS_ATTRIBUTE
from ipuflow.execution.options import BatchingPlan


FORWARD_CONTRACT = (
    "A model (a subclass of ipuflow.models.model.Model, or a plain torch.nn.Module) must return a dict of tensors "
    "from forward, with a scalar 'loss' when the batch carries targets."
)


def refuse_outputs(outputs: Any, model: Optional[torch.nn.Module] = None) -> ConfigurationError:
    """The error for a forward that returned something other than a dict of tensors."""
    name = f"{type(model).__module__}.{type(model).__qualname__}" if model is not None else "the model"
    return ConfigurationError(f"{name}.forward returned a {type(outputs).__name__}, not a dict of tensors. "
                              f"{FORWARD_CONTRACT}", path="model")


def find_loss(outputs: Any, training: bool, model: Optional[torch.nn.Module] = None) -> Optional[torch.Tensor]:
    """The model's loss: the output named ``loss``, else one marked by `ipu_ops.identity_loss`.

    In training the loss must exist and be a scalar; in inference it may be absent (no targets).
    `model` names the model in the errors.
    """
    if not isinstance(outputs, Mapping):
        raise refuse_outputs(outputs, model)
    loss = outputs.get("loss")
    if loss is None:
        for value in outputs.values():
            if getattr(value, IDENTITY_LOSS_ATTRIBUTE, False):
                loss = value
                break
    if training:
        if loss is None:
            raise ConfigurationError(
                "The model returned no loss in training: executors need the model to compute its own "
                f"loss, returned as an output named 'loss' (outputs were {sorted(outputs)}). Check that "
                f"the batch carries the targets. {FORWARD_CONTRACT}", path="model"
            )
        if loss.dim() != 0:
            raise ValueError(
                f"The model's training loss must be a scalar, got shape {tuple(loss.shape)}; reduce it "
                "(e.g. ipu_ops.identity_loss(x, 'mean'))."
            )
    return loss


def _combine(values: List[torch.Tensor]) -> torch.Tensor:
    """Concatenate per-slot outputs along dim 0; scalars become a vector (or stay 0-d if alone)."""
    if len(values) == 1:
        return values[0]
    if values[0].dim() == 0:
        return torch.stack(values)
    return torch.cat(values)


class OutputCollector:
    """Gathers one host call's micro-batch outputs, in ``[step][replica]`` order, by output mode.

    ``all`` keeps every micro-batch, ``final`` the last step of each replica, ``every_n`` every
    micro-batch of device iterations N-1, 2N-1, ... (PopART's global batches), ``sum`` sums each
    replica's steps. The loss of every micro-batch
    is kept as well, for the call's mean loss. Tensors stay on the device and are detached.
    """

    def __init__(self, plan: BatchingPlan) -> None:
        self._keep = plan.kept_steps()
        self._sum = plan.output_mode == "sum"
        self._sums: List[Optional[Dict[str, Any]]] = [None] * plan.replication_factor
        self._kept: List[Dict[str, Any]] = []
        self._losses: List[torch.Tensor] = []

    def add(self, step: int, replica: int, outputs: Mapping[str, Any], loss: Optional[torch.Tensor]) -> None:
        """Record the outputs of micro-batch (`step`, `replica`)."""
        if loss is not None:
            self._losses.append(loss.detach())
        if self._sum:
            detached = {key: value.detach() if isinstance(value, torch.Tensor) else value for key, value in outputs.items()}
            running = self._sums[replica]
            if running is not None:
                detached = {
                    key: running[key] + value if isinstance(value, torch.Tensor) else value for key, value in detached.items()
                }
            self._sums[replica] = detached
        elif self._keep[step]:
            self._kept.append({key: value.detach() if isinstance(value, torch.Tensor) else value for key, value in outputs.items()})

    def outputs(self) -> Dict[str, Any]:
        """The outputs the mode returns: dim 0 = slots × micro_batch, scalars a vector of slots."""
        kept = [entry for entry in self._sums if entry is not None] if self._sum else self._kept
        result: Dict[str, Any] = {}
        for key, first in kept[0].items():
            if isinstance(first, torch.Tensor):
                result[key] = _combine([entry[key] for entry in kept])
            else:
                result[key] = kept[-1][key]
        return result

    def mean_loss(self) -> Optional[torch.Tensor]:
        """The mean loss over every micro-batch of the call, a 0-d tensor left on the device."""
        if not self._losses:
            return None
        if len(self._losses) == 1:
            return self._losses[0]
        return torch.stack(self._losses).mean()
