"""A model's regularization penalty (AllenNLP's `get_regularization_penalty()`) added to its training
loss inside the forward pass, so that every executor (native, compiled, poptorch) backpropagates it,
and returned as the ``reg_loss`` output for the trainer's logs."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

REG_LOSS = "reg_loss"
_HOOKED = "_ipuflow_regularization_hook"


def regularizes(model: torch.nn.Module) -> bool:
    """Whether `model` overrides `get_regularization_penalty` (the `Model` base's returns None)."""
    from ipuflow.models.model import Model

    method = getattr(type(model), "get_regularization_penalty", None)
    return method is not None and method is not getattr(Model, "get_regularization_penalty", None)


def _add_penalty(module: torch.nn.Module, args: Any, outputs: Any) -> Optional[Any]:
    if not module.training or not isinstance(outputs, Mapping) or outputs.get("loss") is None:
        return None
    penalty = module.get_regularization_penalty()  # type: ignore[operator]
    if penalty is None:
        return None
    loss = outputs["loss"]
    penalty = torch.as_tensor(penalty, dtype=loss.dtype, device=loss.device)
    return {**outputs, "loss": loss + penalty, REG_LOSS: penalty.detach()}


def add_regularization_penalty(model: torch.nn.Module) -> bool:
    """If `model` has a regularization penalty, make its training forward add it to ``loss`` and return
    it as ``reg_loss`` (once per model; validation and inference are left alone, as in AllenNLP).
    Returns whether it does."""
    if not regularizes(model):
        return False
    if not getattr(model, _HOOKED, False):
        model.register_forward_hook(_add_penalty)
        setattr(model, _HOOKED, True)
    return True
