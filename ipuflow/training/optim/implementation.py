"""Which of torch's implementations of an optimizer's update runs: fused, foreach or single-tensor.

torch offers up to three implementations of the same update: `fused` (one kernel over all tensors),
`foreach` (one operation per step of the update over lists of tensors) and the single-tensor loop.
They compute the same update up to floating-point rounding, and their state dicts are the same.
torch itself never chooses `fused` and uses `foreach` only on accelerators, so left alone it runs
the slowest one on the CPU; ipuflow chooses the fastest one that the installed torch supports for
where the parameters are, unless the config's `fused` and `foreach` keys say otherwise.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterable, Mapping, Optional, Sequence, Tuple

import torch

from ipuflow.config.errors import ConfigurationError
from ipuflow import torch_features
from ipuflow.torch_features import FUSED_ADAM_ON_CUDA, FUSED_OPTIMIZERS_ON_CPU, FUSED_SGD_ON_CUDA

FUSED = "fused"
FOREACH = "foreach"
SINGLE_TENSOR = "single-tensor"
OWN_STEP = "own step"
"""The implementation of an optimizer class that has neither switch (LAMB, SparseAdam): its one step."""

FUSED_SUPPORT: Dict[type, Dict[str, Tuple[int, int]]] = {
    torch.optim.Adam: {"cuda": FUSED_ADAM_ON_CUDA, "cpu": FUSED_OPTIMIZERS_ON_CPU},
    torch.optim.AdamW: {"cuda": FUSED_ADAM_ON_CUDA, "cpu": FUSED_OPTIMIZERS_ON_CPU},
    torch.optim.SGD: {"cuda": FUSED_SGD_ON_CUDA, "cpu": FUSED_OPTIMIZERS_ON_CPU},
    # Fused Adagrad on CUDA came later and in few releases; there torch's own foreach default stays.
    torch.optim.Adagrad: {"cpu": FUSED_OPTIMIZERS_ON_CPU},
}
"""Per torch optimizer class, the device types with a fused kernel and the torch release that added it."""


@dataclass(frozen=True)
class Implementation:
    """The implementation an optimizer runs, and whether the config chose it or ipuflow did."""

    name: str
    """``fused``, ``foreach``, ``single-tensor`` or ``own step``."""
    automatic: bool
    """True when the config left the choice to ipuflow (`fused` and `foreach` null)."""
    why_not_fused: Optional[str] = None
    """For an automatic choice other than fused: why not."""

    def switches(self, accepted: FrozenSet[str]) -> Dict[str, bool]:
        """The `fused`/`foreach` values to give the torch class (only those it accepts)."""
        values = {FUSED: self.name == FUSED, FOREACH: self.name == FOREACH}
        return {key: value for key, value in values.items() if key in accepted}

    def describe(self) -> str:
        """One line for the log: the implementation, and how it was chosen."""
        if self.name == OWN_STEP:
            return "the optimizer's own step (it has no fused or foreach implementation)"
        if not self.automatic:
            return f"{self.name} (set in the config)"
        reason = f"; not fused: {self.why_not_fused}" if self.why_not_fused and self.name != FUSED else ""
        return f"{self.name} (chosen automatically{reason})"


def torch_class(optimizer_class: type) -> type:
    """The torch optimizer class that `optimizer_class` (an ipuflow subclass) runs."""
    for cls in optimizer_class.__mro__:
        if cls.__module__.startswith("torch.optim") and cls is not torch.optim.Optimizer:
            return cls
    return optimizer_class


def accepted_switches(optimizer_class: type) -> FrozenSet[str]:
    """Which of `fused` and `foreach` the installed torch's class for `optimizer_class` takes."""
    cls = torch_class(optimizer_class)
    if not cls.__module__.startswith("torch.optim"):
        return frozenset()
    return frozenset(name for name in inspect.signature(cls).parameters if name in (FUSED, FOREACH))


def fused_unsupported(optimizer_class: type, param_groups: Sequence[Mapping[str, Any]],
                      release: Optional[Tuple[int, int]] = None,
                      accepted: Optional[FrozenSet[str]] = None) -> Optional[str]:
    """Why torch (the installed one, or `release` with `accepted` switches) has no fused update for
    these parameter groups, or None if it has one."""
    release = torch_features.TORCH_RELEASE if release is None else release
    accepted = accepted_switches(optimizer_class) if accepted is None else accepted
    cls = torch_class(optimizer_class)
    name = cls.__name__
    devices = next((FUSED_SUPPORT[base] for base in cls.__mro__ if base in FUSED_SUPPORT), None)
    version = f"{release[0]}.{release[1]}"
    if FUSED not in accepted or devices is None:
        return f"torch {version} has no fused {name}"
    for parameter in _parameters(param_groups):
        device = parameter.device.type
        if device not in devices:
            return f"ipuflow uses torch's fused {name} only for parameters on {' or '.join(sorted(devices))}, not {device}"
        if release < devices[device]:
            needed = devices[device]
            return f"fused {name} for {device} parameters needs torch>={needed[0]}.{needed[1]}; this is torch {version}"
        if not parameter.dtype.is_floating_point:
            return f"fused {name} needs floating-point parameters, not {parameter.dtype}"
    return None


def foreach_unsupported(optimizer_class: type, param_groups: Sequence[Mapping[str, Any]],
                        accepted: Optional[FrozenSet[str]] = None) -> Optional[str]:
    """Why torch has no foreach update for these parameter groups, or None if it has one."""
    accepted = accepted_switches(optimizer_class) if accepted is None else accepted
    name = torch_class(optimizer_class).__name__
    if FOREACH not in accepted:
        return f"torch has no foreach {name}"
    if any(parameter.layout != torch.strided for parameter in _parameters(param_groups)):
        return f"foreach {name} needs dense parameters"
    return None


def _automatic_fused_hazard(optimizer_class: type, param_groups: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """Why the fused update, though supported, is not chosen automatically."""
    if issubclass(torch_class(optimizer_class), torch.optim.SGD) and any(
            group.get("momentum", 0) != 0 for group in param_groups):
        # torch's fused SGD allocates its momentum buffers uninitialised and fills them in its first
        # update; when dynamic loss scaling skips that update (an overflow), the next one reads garbage.
        return "fused SGD with momentum misreads its first update if dynamic loss scaling skips it"
    return None


def choose_implementation(optimizer_class: type, param_groups: Sequence[Mapping[str, Any]], fused: Optional[bool],
                          foreach: Optional[bool], release: Optional[Tuple[int, int]] = None,
                          accepted: Optional[FrozenSet[str]] = None) -> Implementation:
    """The implementation for the config's `fused` and `foreach` (null: automatic) over these groups.

    Automatically: fused where torch has it for these parameters, else foreach, else single-tensor;
    a false key rules its implementation out. A true key where torch cannot do it is a
    ConfigurationError naming the key. `release` and `accepted` stand for another torch's.
    """
    accepted = accepted_switches(optimizer_class) if accepted is None else accepted
    if fused and foreach:
        raise ConfigurationError("fused and foreach cannot both be true: they are two implementations of the update; "
                                 "set one.", key=FUSED)
    if not accepted:
        return Implementation(OWN_STEP, automatic=fused is None and foreach is None)
    if fused:
        reason = fused_unsupported(optimizer_class, param_groups, release, accepted)
        if reason is not None:
            raise ConfigurationError(f"true asks for torch's fused implementation, but {reason}. Set it to null (the "
                                     "fastest available) or false.", key=FUSED)
        return Implementation(FUSED, automatic=False)
    if foreach:
        reason = foreach_unsupported(optimizer_class, param_groups, accepted)
        if reason is not None:
            raise ConfigurationError(f"true asks for torch's foreach implementation, but {reason}. Set it to null or "
                                     "false.", key=FOREACH)
        return Implementation(FOREACH, automatic=False)
    automatic = fused is None and foreach is None
    why_not_fused: Optional[str] = "the config sets fused: false"
    if fused is None:
        why_not_fused = (fused_unsupported(optimizer_class, param_groups, release, accepted)
                         or _automatic_fused_hazard(optimizer_class, param_groups))
        if why_not_fused is None:
            return Implementation(FUSED, automatic=automatic)
    if foreach is None and foreach_unsupported(optimizer_class, param_groups, accepted) is None:
        return Implementation(FOREACH, automatic=automatic, why_not_fused=why_not_fused)
    return Implementation(SINGLE_TENSOR, automatic=automatic, why_not_fused=why_not_fused)


def apply_implementation(optimizer: torch.optim.Optimizer, implementation: Implementation,
                         accepted: FrozenSet[str]) -> None:
    """Make `optimizer` (a torch optimizer of a class with switches `accepted`) run `implementation`:
    its groups' and defaults' switches, torch's marker for loss scalers, and its step counters where
    that implementation keeps them (a fused update keeps them on the parameters' device)."""
    switches = implementation.switches(accepted)
    optimizer.defaults.update(switches)
    for group in optimizer.param_groups:
        group.update(switches)
    fused = implementation.name == FUSED
    # torch sets this in the constructor of a fused optimizer: GradScaler then leaves the skipping of
    # an overflowed update to the fused kernel instead of reading the overflow flag on the host.
    optimizer._step_supports_amp_scaling = fused  # type: ignore[attr-defined]
    for group in optimizer.param_groups:
        on_device = fused or bool(group.get("capturable"))
        for parameter in group["params"]:
            step = optimizer.state.get(parameter, {}).get("step")
            if isinstance(step, torch.Tensor):
                # What each implementation would have created: a float32 counter on the parameter's
                # device (fused), else a host scalar, which the others read without a device sync.
                target = step.to(parameter.device, torch.float32) if on_device else step.to("cpu")
                optimizer.state[parameter]["step"] = target


def _parameters(param_groups: Iterable[Mapping[str, Any]]) -> Iterable[torch.Tensor]:
    for group in param_groups:
        yield from group["params"]
