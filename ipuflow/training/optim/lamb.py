"""LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning", Algorithm 2).

Torch has no LAMB; poptorch does (`poptorch.optim.LAMB`), with the same argument names, so an
executor can convert this class to the device implementation.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Tuple

import torch

from ipuflow.execution.poptorch import LAMB_MAX_WEIGHT_NORM


class Lamb(torch.optim.Optimizer):
    """Layer-wise adaptive moments: Adam's direction scaled per tensor by ||w|| / ||update||.

    For each parameter tensor ``w`` with gradient ``g`` at step ``t``:
    ``m = β1 m + (1-β1) g``, ``v = β2 v + (1-β2) g²``, ``r = m̂ / (sqrt(v̂) + eps)`` (bias-corrected
    when `bias_correction`), ``u = r + weight_decay · w``, and
    ``w ← w − lr · φ(||w||) / ||u|| · u`` where ``φ(z) = min(z, max_weight_norm)`` (identity when
    `max_weight_norm` is None). The trust ratio is 1 when either norm is zero. `max_weight_norm`
    defaults to poptorch's LAMB default (65500, fp16's largest value), so both backends clip alike.
    """

    poptorch_twin = "LAMB"  # the poptorch executor converts this class to poptorch.optim.LAMB

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        bias_correction: bool = True,
        max_weight_norm: Optional[float] = LAMB_MAX_WEIGHT_NORM,
    ) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid betas: {betas}")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            bias_correction=bias_correction,
            max_weight_norm=max_weight_norm,
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:  # type: ignore[override]
        """Apply one LAMB update to every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[param]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["step"] += 1
                # The step stays a tensor so bias correction needs no host-device sync.
                step = state["step"].to(device=param.device, dtype=param.dtype)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                if group["bias_correction"]:
                    m_hat = exp_avg / (1 - torch.pow(beta1, step))
                    v_hat = exp_avg_sq / (1 - torch.pow(beta2, step))
                else:
                    m_hat, v_hat = exp_avg, exp_avg_sq
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"] != 0:
                    update.add_(param, alpha=group["weight_decay"])
                weight_norm = param.norm(p=2)
                if group["max_weight_norm"] is not None:
                    weight_norm = weight_norm.clamp(max=group["max_weight_norm"])
                update_norm = update.norm(p=2)
                # The trust ratio falls back to 1 when a norm is zero (fresh zero-initialised biases).
                trust_ratio = torch.where(
                    (weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, torch.ones_like(weight_norm)
                )
                param.add_(update * trust_ratio, alpha=-group["lr"])
        return loss
