"""Model-side IPU annotations that also run on CPU and CUDA, so one model file serves every backend.

Each op forwards to poptorch when poptorch is already imported (the poptorch executor imports it
before tracing) and otherwise does what it means in eager PyTorch: `identity_loss` reduces,
`BeginBlock` records the intended placement (which the poptorch executor applies when it compiles),
`Block` is a no-op, `recomputation_checkpoint` and `set_available_memory` are identities.
"""

from __future__ import annotations

import sys
from types import ModuleType, TracebackType
from typing import Any, Callable, List, Optional, Type

import torch

from ipuflow.torch_features import is_compiling

IDENTITY_LOSS_ATTRIBUTE = "_ipuflow_identity_loss"
"""Set on eager `identity_loss` results so executors find a loss not returned under the name ``loss``."""

_REDUCTIONS = ("sum", "mean", "none")


def _poptorch() -> Optional[ModuleType]:
    # Never import poptorch from here: on native backends it may be absent or broken. It is used
    # only when the poptorch executor has imported it already.
    return sys.modules.get("poptorch")


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Mark `x` as the model's loss, reduced by `reduction` (``"sum"``, ``"mean"`` or ``"none"``)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"identity_loss: reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
    poptorch = _poptorch()
    if poptorch is not None:
        loss = poptorch.identity_loss(x, reduction=reduction)
    elif reduction == "sum":
        loss = x.sum()
    elif reduction == "mean":
        loss = x.mean()
    else:
        loss = x.clone()
    if not is_compiling():
        # Tagging a tensor is eager-only; compiled models must return the loss as ``loss``.
        setattr(loss, IDENTITY_LOSS_ATTRIBUTE, True)
    return loss


def recomputation_checkpoint(*tensors: torch.Tensor) -> Any:
    """Mark tensors to keep (not recompute) in a pipelined backward pass; the identity elsewhere."""
    poptorch = _poptorch()
    if poptorch is not None:
        return poptorch.recomputationCheckpoint(*tensors)
    return tensors[0] if len(tensors) == 1 else tensors


def set_available_memory(tensor: torch.Tensor, proportion: float) -> torch.Tensor:
    """Hint the share of tile memory for the op producing `tensor`; the identity elsewhere."""
    if not 0.0 < proportion <= 1.0:
        raise ValueError(f"set_available_memory: proportion must be in (0, 1], got {proportion}.")
    poptorch = _poptorch()
    if poptorch is not None:
        return poptorch.set_available_memory(tensor, proportion)
    return tensor


BLOCK_ATTRIBUTE = "ipuflow_block"
"""Set by `BeginBlock` on the module to the placement asked for, ``(user_id, ipu_id)``."""


def BeginBlock(module: torch.nn.Module, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> torch.nn.Module:  # noqa: N802 (poptorch's name)
    """Start a pipeline block at `module` on IPU `ipu_id`: the module and the ones after it run there.

    The placement is recorded on the module, and the poptorch executor applies it when it compiles,
    whether the model was built before poptorch was imported or after; with poptorch imported it also
    goes to `poptorch.BeginBlock` at once. Other backends ignore it."""
    setattr(module, BLOCK_ATTRIBUTE, (user_id, ipu_id))
    poptorch = _poptorch()
    if poptorch is not None:
        return poptorch.BeginBlock(module, user_id=user_id, ipu_id=ipu_id)
    return module


_SCOPE_OBSERVERS: List[Callable[[Optional[str], Optional[int]], None]] = []


class _Observation:
    """A registered Block-scope observer; `remove()` unregisters it (as a torch hook handle does)."""

    def __init__(self, observer: Callable[[Optional[str], Optional[int]], None]) -> None:
        self._observer = observer
        _SCOPE_OBSERVERS.append(observer)

    def remove(self) -> None:
        if self._observer in _SCOPE_OBSERVERS:
            _SCOPE_OBSERVERS.remove(self._observer)


def observe_block_scopes(observer: Callable[[Optional[str], Optional[int]], None]) -> _Observation:
    """Call observer(user_id, ipu_id) for every `Block` scope entered until the handle is removed
    (the poptorch executor checks where a model's scopes place it before it compiles)."""
    return _Observation(observer)


class Block:
    """A scope inside `forward` whose ops run on IPU `ipu_id`; a no-op elsewhere."""

    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        self.user_id = user_id
        self.ipu_id = ipu_id
        self._scope: Any = None

    def __enter__(self) -> "Block":
        for observer in list(_SCOPE_OBSERVERS):
            observer(self.user_id, self.ipu_id)
        poptorch = _poptorch()
        if poptorch is not None:
            self._scope = poptorch.Block(user_id=self.user_id, ipu_id=self.ipu_id)
            self._scope.__enter__()
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]) -> None:
        if self._scope is not None:
            self._scope.__exit__(kind, error, trace)
            self._scope = None
