"""Activation functions that configs name by string."""

from __future__ import annotations

from typing import Callable, Dict

import torch

from ipuflow.config import ConfigurationError

ACTIVATIONS: Dict[str, Callable[[], torch.nn.Module]] = {
    "relu": torch.nn.ReLU,
    "gelu": torch.nn.GELU,
    "tanh": torch.nn.Tanh,
    "sigmoid": torch.nn.Sigmoid,
    "elu": torch.nn.ELU,
    "leaky_relu": torch.nn.LeakyReLU,
    "silu": torch.nn.SiLU,
    "linear": torch.nn.Identity,
}


def activation_by_name(name: str, key: str) -> torch.nn.Module:
    """A new module for the activation `name`; `key` is the config key (in the caller's section), for the error."""
    if name not in ACTIVATIONS:
        raise ConfigurationError(f"unknown activation {name!r}; expected one of {', '.join(ACTIVATIONS)}.", key=key)
    return ACTIVATIONS[name]()
