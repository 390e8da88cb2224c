"""Moving averages of the trainable weights, swapped in for validation and for the best weights."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Optional, Tuple

import torch

from ipuflow.config import Registrable, validators

NamedParameters = List[Tuple[str, torch.nn.Parameter]]


class MovingAverage(Registrable):
    """Keeps a shadow copy of each parameter; `parameters` (the trainable named parameters) is
    injected by the trainer."""

    default_implementation: ClassVar[Optional[str]] = "exponential"

    def __init__(self, parameters: NamedParameters) -> None:
        self._names = [name for name, _ in parameters]
        self._parameters = [param for _, param in parameters]
        self._shadows = [param.detach().clone() for param in self._parameters]
        self._backups: Optional[List[torch.Tensor]] = None

    def apply(self, num_updates: Optional[int] = None) -> None:
        """Fold the current parameter values into the averages (after `num_updates` updates)."""
        raise NotImplementedError

    def _shadows_on_parameter_devices(self) -> None:
        # The executor may move the model after we cloned the parameters; follow it once.
        if self._shadows and self._shadows[0].device != self._parameters[0].device:
            self._shadows = [shadow.to(param.device) for shadow, param in zip(self._shadows, self._parameters)]

    @torch.no_grad()
    def assign_average_value(self) -> None:
        """Back up the current parameters and put the averages in their place."""
        self._shadows_on_parameter_devices()
        self._backups = [param.detach().clone() for param in self._parameters]
        for param, shadow in zip(self._parameters, self._shadows):
            param.copy_(shadow)

    @torch.no_grad()
    def restore(self) -> None:
        """Put back the parameters that `assign_average_value` backed up."""
        if self._backups is None:
            return
        for param, backup in zip(self._parameters, self._backups):
            param.copy_(backup)
        self._backups = None

    def state_dict(self) -> Dict[str, Any]:
        """The averages by parameter name (CPU tensors)."""
        return {"shadows": {name: shadow.detach().cpu() for name, shadow in zip(self._names, self._shadows)}}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the averages saved by `state_dict`."""
        shadows = state_dict["shadows"]
        self._shadows = [shadows[name].to(param.device).clone() for name, param in zip(self._names, self._parameters)]


@MovingAverage.register("exponential")
class ExponentialMovingAverage(MovingAverage):
    """``shadow = d · shadow + (1 − d) · param`` with ``d = min(decay, (numerator + n) /
    (denominator + n))`` after ``n`` updates (just `decay` when n is unknown), so early averages warm
    up quickly."""

    def __init__(
        self,
        parameters: NamedParameters,
        decay: float = 0.9999,
        numerator: float = 1.0,
        denominator: float = 10.0,
    ) -> None:
        super().__init__(parameters)
        self._decay = validators.probability("decay", decay)
        self._numerator = numerator
        self._denominator = denominator

    @torch.no_grad()
    def apply(self, num_updates: Optional[int] = None) -> None:
        if num_updates is not None:
            decay = min(self._decay, (self._numerator + num_updates) / (self._denominator + num_updates))
        else:
            decay = self._decay
        self._shadows_on_parameter_devices()
        # lerp(shadow, param, 1 - d) = d·shadow + (1 - d)·param, one fused op over every tensor.
        torch._foreach_lerp_(self._shadows, [param.detach() for param in self._parameters], 1.0 - decay)
