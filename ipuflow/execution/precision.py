"""Mixed precision for the native executor: autocast contexts and static or dynamic loss scaling."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Dict, List, Optional

import torch

from ipuflow.torch_features import grad_scaler, require_autocast

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

DEFAULT_DYNAMIC_INIT_SCALE = 2.0**16
"""torch.amp.GradScaler's initial scale, used when auto_loss_scaling has no loss_scaling to start from."""


def autocast_factory(precision: str, device_type: str) -> Callable[[], ContextManager[Any]]:
    """A callable returning the context to run a forward pass in for `precision`.

    fp32 runs without autocast; bf16 and fp16 use `torch.autocast` on the executor's device
    type, so weights (and optimizer updates) stay fp32 while matmuls run in 16 bits.
    """
    dtype = _AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext
    require_autocast(device_type, dtype, precision, key="precision")
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)


class LossScaler:
    """Scales the loss before backward and unscales gradients before the update.

    * no scaling: the loss is only divided by the number of micro-batches per update (mean reduction);
    * static (`loss_scaling`): multiply by a constant, divide the gradients by it before clipping and
      the update, as poptorch's optimizers do (a numerical no-op that keeps fp16 gradients in range);
    * dynamic (`auto_loss_scaling`): torch's `GradScaler`, starting from `loss_scaling` if given (2^16
      otherwise): an update whose gradients hold an inf or NaN is skipped and the scale halves; after
      2000 finite updates in a row it doubles. Deciding to skip reads one flag from the device per
      update, the only host-device sync in a native training call (none with a fused optimizer: its
      kernel reads the flag and skips the update itself). This is the native executor's
      own scheme; the poptorch executor's is PopART's, which never skips an update (docs/execution.md).
    """

    def __init__(self, device_type: str, loss_scaling: Optional[float], auto_loss_scaling: bool, micro_batches_per_update: int) -> None:
        self.dynamic = auto_loss_scaling
        self.static_scale = None if auto_loss_scaling else loss_scaling
        self._grad_scaler: Optional[Any] = None  # torch.amp.GradScaler (torch.cuda.amp's before torch 2.3)
        if auto_loss_scaling:
            self._grad_scaler = grad_scaler(device_type, loss_scaling or DEFAULT_DYNAMIC_INIT_SCALE, key="auto_loss_scaling")
        # One multiplier folds the mean over micro-batches and a static scale into a single op.
        self.loss_factor = (self.static_scale or 1.0) / micro_batches_per_update

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate one micro-batch's loss, scaled for mean reduction (and loss scaling)."""
        if self.loss_factor != 1.0:
            loss = loss * self.loss_factor
        if self._grad_scaler is not None:
            loss = self._grad_scaler.scale(loss)
        loss.backward()

    def unscale_(self, optimizer: torch.optim.Optimizer, grads: Callable[[], List[torch.Tensor]]) -> None:
        """Bring the accumulated gradients back to their true scale (before clipping)."""
        if self._grad_scaler is not None:
            self._grad_scaler.unscale_(optimizer)
        elif self.static_scale is not None:
            tensors = grads()
            if tensors:
                torch._foreach_mul_(tensors, 1.0 / self.static_scale)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Apply the update (skipped by the dynamic scaler on non-finite gradients) and adapt the scale."""
        if self._grad_scaler is not None:
            self._grad_scaler.step(optimizer)
            self._grad_scaler.update()
        else:
            optimizer.step()

    @property
    def scale(self) -> Optional[float]:
        """The current loss scale (reads the device for the dynamic scaler); None without scaling."""
        if self._grad_scaler is not None:
            return float(self._grad_scaler.get_scale())
        return self.static_scale

    def state_dict(self) -> Dict[str, Any]:
        """The dynamic scaler's state (numbers only); empty for static or no scaling."""
        return dict(self._grad_scaler.state_dict()) if self._grad_scaler is not None else {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        if self._grad_scaler is not None and state:
            self._grad_scaler.load_state_dict(state)
