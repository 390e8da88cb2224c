"""Registrable optimizers built from the model's named parameters, with regex parameter groups.

Config: ``"optimizer": {"type": "adamw", "lr": 1e-4, "parameter_groups": [[["bias", "LayerNorm"],
{"weight_decay": 0.0}]]}``. `model_parameters` is injected by the trainer, never written in config.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from ipuflow.config import ConfigurationError, Registrable, validators
from ipuflow.config.bounded_regex import search_names
from ipuflow.execution.poptorch import LAMB_MAX_WEIGHT_NORM
from ipuflow.training.optim.implementation import (Implementation, accepted_switches, apply_implementation,
                                                   choose_implementation)
from ipuflow.training.optim.lamb import Lamb

logger = logging.getLogger(__name__)

ParameterGroups = List[Tuple[List[str], Dict[str, Any]]]

_NON_NEGATIVE = ("lr", "eps", "weight_decay", "momentum", "alpha", "lr_decay", "initial_accumulator_value")


def check_hyperparameters(options: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse hyperparameters that torch would refuse (or, in a parameter group, silently take), naming
    the key (`prefix` + name): a negative lr, eps, weight decay or momentum, betas outside [0, 1), rho
    outside [0, 1]."""
    for name in _NON_NEGATIVE:
        if name in options and not isinstance(options[name], torch.Tensor):
            validators.non_negative_number(prefix + name, options[name])
    if "betas" in options:
        for index, beta in enumerate(options["betas"]):
            validators.fraction_below_one(f"{prefix}betas.{index}", beta)
    if "rho" in options:
        validators.probability(prefix + "rho", options["rho"])


def make_parameter_groups(
    model_parameters: List[Tuple[str, torch.nn.Parameter]],
    parameter_groups: Optional[ParameterGroups] = None,
    no_decay: Sequence[str] = (),
) -> List[Dict[str, Any]]:
    """Torch param-group dicts from ``[[regexes], {options}]`` pairs (``re.search`` on names).

    Unmatched parameters form a last default group with the optimizer's own options, except those
    matching a `no_decay` regex, which form a group with ``weight_decay: 0``; a group whose
    options say ``{"requires_grad": false}`` freezes its parameters and is left out. A parameter
    matching two groups is a `ConfigurationError`.
    """
    model_parameters = list(model_parameters)
    if isinstance(no_decay, str) or not all(isinstance(regex, str) for regex in no_decay):
        raise ConfigurationError(key="no_decay", expected="a list of regexes", found=no_decay)
    if not parameter_groups and not no_decay:
        return [{"params": [param for _, param in model_parameters if param.requires_grad]}]
    groups = _configured_groups(parameter_groups or [])
    undecayed, default_params = _assign_parameters(model_parameters, groups, no_decay)
    torch_groups = _torch_groups(groups)
    undecayed = [param for param in undecayed if param.requires_grad]
    if undecayed:
        torch_groups.append({"params": undecayed, "weight_decay": 0.0})
    default_params = [param for param in default_params if param.requires_grad]
    if default_params:
        torch_groups.append({"params": default_params})
    num_trainable = sum(param.numel() for group in torch_groups for param in group["params"])
    logger.info("Optimizer: %d parameter groups, %d trainable values", len(torch_groups), num_trainable)
    return torch_groups


def _configured_groups(parameter_groups: ParameterGroups) -> List[Dict[str, Any]]:
    """Each ``[[regexes], {options}]`` entry, checked, as ``{"regexes", "options", "params": []}``."""
    groups: List[Dict[str, Any]] = []
    for index, entry in enumerate(parameter_groups):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 or not isinstance(entry[1], dict):
            raise ConfigurationError(key=f"parameter_groups.{index}", expected="[[regex, ...], {option: value}]", found=entry)
        regexes, options = entry
        if isinstance(regexes, str) or not isinstance(regexes, (list, tuple)):
            raise ConfigurationError(key=f"parameter_groups.{index}.0", expected="a list of regexes", found=regexes)
        check_hyperparameters(options, prefix=f"parameter_groups.{index}.1.")
        groups.append({"regexes": list(regexes), "options": dict(options), "params": []})
    return groups


def _assign_parameters(model_parameters: List[Tuple[str, torch.nn.Parameter]], groups: List[Dict[str, Any]],
                       no_decay: Sequence[str]) -> Tuple[List[torch.nn.Parameter], List[torch.nn.Parameter]]:
    """Put each parameter in the one group whose regex finds its name, and return those no group
    finds: (the ones a `no_decay` regex finds, the rest). Warns of a group regex that finds none."""
    names = [name for name, _ in model_parameters]
    # Each pattern is searched under a time limit: a config's regex may backtrack catastrophically.
    group_matches = [[(regex, set(search_names(regex, names, f"parameter_groups.{index}.0.{position}")))
                      for position, regex in enumerate(group["regexes"])] for index, group in enumerate(groups)]
    undecayed_names = {name for position, regex in enumerate(no_decay)
                       for name in search_names(regex, names, f"no_decay.{position}")}
    default_params: List[torch.nn.Parameter] = []
    undecayed: List[torch.nn.Parameter] = []
    matched_regexes: set = set()
    for name, param in model_parameters:
        owner: Optional[int] = None
        for index, matches in enumerate(group_matches):
            for regex, matched in matches:
                if name in matched:
                    if owner is not None and owner != index:
                        raise ConfigurationError(
                            f"parameter {name!r} matches group {owner} and group {index}; each parameter may "
                            "match only one group.",
                            key="parameter_groups",
                        )
                    owner = index
                    matched_regexes.add((index, regex))
        if owner is None and name in undecayed_names:
            undecayed.append(param)
        elif owner is None:
            default_params.append(param)
        else:
            groups[owner]["params"].append(param)

    for index, group in enumerate(groups):
        for regex in group["regexes"]:
            if (index, regex) not in matched_regexes:
                logger.warning("optimizer.parameter_groups.%d: regex %r matches no parameter", index, regex)
    return undecayed, default_params


def _torch_groups(groups: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The torch param groups of the configured groups: a ``requires_grad: false`` group freezes its
    parameters and is left out, and a group left with no trainable parameter is dropped."""
    torch_groups: List[Dict[str, Any]] = []
    for index, group in enumerate(groups):
        options = group["options"]
        requires_grad = options.pop("requires_grad", True)
        if requires_grad is False:
            for param in group["params"]:
                param.requires_grad_(False)
            if options:
                logger.warning("optimizer.parameter_groups.%d freezes its parameters; ignoring %s", index, options)
            continue
        params = [param for param in group["params"] if param.requires_grad]
        if params:
            torch_groups.append({"params": params, **options})
    return torch_groups


class Optimizer(torch.optim.Optimizer, Registrable):
    """A registrable torch optimizer; each implementation is the torch class with our constructor.

    `fused` and `foreach` (where torch's class has them) choose torch's implementation of the
    update; null (the default) takes the fastest one torch has for where the parameters are (see
    `ipuflow.training.optim.implementation`).
    """

    default_implementation: ClassVar[Optional[str]] = "adam"

    def __init__(self, *args: Any, fused: Optional[bool] = None, foreach: Optional[bool] = None, **kwargs: Any) -> None:
        """Build torch's optimizer and choose its implementation of the update.

        fused: torch's fused update, one kernel over every parameter (the fastest): true, false, or
            null to use it wherever torch has it for the parameters' device and dtype.
        foreach: torch's foreach update, each step over all parameters at once: true, false, or null
            to use it where fused is not available (the single-tensor loop when both are false).
        """
        # Between each implementation's constructor and the torch class's: the hyperparameters are
        # checked here, so that a bad one names its config key instead of torch's bare ValueError.
        check_hyperparameters(kwargs)
        super().__init__(*args, **kwargs)
        self._implementation_request = (fused, foreach)
        self.choose_implementation()

    @property
    def implementation(self) -> Implementation:
        """The implementation of the update this optimizer runs."""
        return self._implementation

    def choose_implementation(self) -> Implementation:
        """Choose (again) the implementation for where the parameters are now: the executor may
        have moved them since the optimizer was built."""
        accepted = accepted_switches(type(self))
        self._implementation = choose_implementation(type(self), self.param_groups, *self._implementation_request)
        apply_implementation(self, self._implementation, accepted)
        return self._implementation

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """torch's, except that the implementation stays this optimizer's: torch would take the one
        the state was saved with (they share one state layout, so any may resume any other's)."""
        super().load_state_dict(state_dict)
        apply_implementation(self, self.implementation, accepted_switches(type(self)))


@Optimizer.register("adam")
class AdamOptimizer(Optimizer, torch.optim.Adam):
    """`torch.optim.Adam`."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.001,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        fused: Optional[bool] = None,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            betas=(betas[0], betas[1]),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            fused=fused,
            foreach=foreach,
        )


NO_DECAY = ("bias", "LayerNorm\\.weight", "layer_norm\\.weight", "layernorm\\.weight")
"""Parameters that `adamw` does not decay by default: biases and LayerNorm weights, as the Hugging
Face Trainer and IPUTrainer do."""


@Optimizer.register("adamw")
class AdamWOptimizer(Optimizer, torch.optim.AdamW):
    """`torch.optim.AdamW` (decoupled weight decay, default 0.01).

    Parameters whose names match a `no_decay` regex (by default biases and LayerNorm weights) and no
    `parameter_groups` entry get no weight decay; `no_decay: []` decays every parameter (null: the default).
    """

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.001,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
        weight_decay: float = 0.01,
        amsgrad: bool = False,
        no_decay: Optional[List[str]] = None,
        fused: Optional[bool] = None,
        foreach: Optional[bool] = None,
    ) -> None:
        undecayed: Sequence[str] = NO_DECAY if no_decay is None else no_decay
        if weight_decay == 0 and isinstance(undecayed, (list, tuple)):
            # Nothing to withhold: a separate group would change nothing but cost every update a pass.
            undecayed = ()
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups, undecayed),
            lr=lr,
            betas=(betas[0], betas[1]),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            fused=fused,
            foreach=foreach,
        )


@Optimizer.register("huggingface_adamw")
class HuggingfaceAdamWOptimizer(AdamWOptimizer):
    """AllenNLP 2.10's `huggingface_adamw` (transformers' AdamW), kept so that ported configs mean
    the same: `torch.optim.AdamW` with that optimizer's defaults (lr 1e-5, weight decay 0).

    correct_bias: only true (Adam's bias correction, which torch's AdamW always applies).
    """

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 1e-05,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
        weight_decay: float = 0.0,
        correct_bias: bool = True,
        fused: Optional[bool] = None,
        foreach: Optional[bool] = None,
    ) -> None:
        if correct_bias is not True:
            raise ConfigurationError(
                "false (AdamW without Adam's bias correction, BERT's original optimizer) is not supported: torch's "
                "AdamW always corrects the bias. Remove the key.", key="correct_bias")
        super().__init__(model_parameters, parameter_groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         fused=fused, foreach=foreach)


@Optimizer.register("sgd")
class SgdOptimizer(Optimizer, torch.optim.SGD):
    """`torch.optim.SGD`; `lr` is required."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        lr: float,
        parameter_groups: Optional[ParameterGroups] = None,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        fused: Optional[bool] = None,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            fused=fused,
            foreach=foreach,
        )


@Optimizer.register("rmsprop")
class RmsPropOptimizer(Optimizer, torch.optim.RMSprop):
    """`torch.optim.RMSprop`."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.01,
        alpha: float = 0.99,
        eps: float = 1e-08,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            foreach=foreach,
        )


@Optimizer.register("adagrad")
class AdagradOptimizer(Optimizer, torch.optim.Adagrad):
    """`torch.optim.Adagrad`."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.01,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        fused: Optional[bool] = None,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            fused=fused,
            foreach=foreach,
        )


@Optimizer.register("adadelta")
class AdadeltaOptimizer(Optimizer, torch.optim.Adadelta):
    """`torch.optim.Adadelta`."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-06,
        weight_decay: float = 0.0,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
        )


@Optimizer.register("adamax")
class AdamaxOptimizer(Optimizer, torch.optim.Adamax):
    """`torch.optim.Adamax`."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.002,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
        weight_decay: float = 0.0,
        foreach: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            betas=(betas[0], betas[1]),
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
        )


@Optimizer.register("sparse_adam")
class SparseAdamOptimizer(Optimizer, torch.optim.SparseAdam):
    """`torch.optim.SparseAdam` (for embeddings with ``sparse=True``)."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.001,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            betas=(betas[0], betas[1]),
            eps=eps,
        )


@Optimizer.register("lamb")
class LambOptimizer(Optimizer, Lamb):
    """LAMB (see `ipuflow.training.optim.lamb.Lamb`); maps to `poptorch.optim.LAMB` on IPUs."""

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[ParameterGroups] = None,
        lr: float = 0.001,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-08,
        weight_decay: float = 0.01,
        bias_correction: bool = True,
        max_weight_norm: Optional[float] = LAMB_MAX_WEIGHT_NORM,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            betas=(betas[0], betas[1]),
            eps=eps,
            weight_decay=weight_decay,
            bias_correction=bias_correction,
            max_weight_norm=max_weight_norm,
        )
