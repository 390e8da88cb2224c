"""Building a `transformers` auto model offline: from a local pretrained directory, from an
archive's copy of its config, or from a config dict; and freezing its parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import torch

from ipuflow.config import ConfigurationError
from ipuflow.config.bounded_regex import search_names
from ipuflow.data.local_pretrained import import_transformers_offline, is_archived_copy, resolve_local_pretrained
from ipuflow.models.huggingface.load_report import log_load_summary, quiet_load_report

WEIGHT_FILES = (
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
    "tf_model.h5", "flax_model.msgpack",
)
"""The files one of which a Hugging Face model directory holds its weights in."""


def load_auto_model(auto_class: str, name: str, key: str, settings: Mapping[str, Any],
                    from_pretrained_kwargs: Optional[Mapping[str, Any]] = None) -> torch.nn.Module:
    """`transformers.<auto_class>` from the local pretrained directory `name` (a path or
    `package://pkg/dir`; `key` is its config key), with config `settings` (such as `num_labels`).

    Inside an archive being loaded, `name` is the archive's copy of the model's config, without
    weights: the model is built from the config and the archive's weights are loaded over it.
    """
    transformers = import_transformers_offline()
    factory = getattr(transformers, auto_class)
    path = resolve_local_pretrained(name, key)
    if is_archived_copy(name):
        try:
            config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False,
                                                             **settings)
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"the archive's copy of {name!r} has no readable config.json: {error}", key=key) from None
        return factory.from_config(config, trust_remote_code=False)
    if not has_weights(path):
        raise ConfigurationError(
            f"{name!r} ({path}) holds no model weights: expected one of {', '.join(WEIGHT_FILES)} there. Point it at "
            f"a directory written by save_pretrained, or give `config` to start from random weights.",
            key=key,
        )
    kwargs: Dict[str, Any] = dict(from_pretrained_kwargs or {})
    kwargs["local_files_only"] = True
    kwargs["trust_remote_code"] = False  # never code from the model directory, and never a prompt on stdin
    kwargs.setdefault("ignore_mismatched_sizes", True)  # a new task head replaces one with other labels
    kwargs["output_loading_info"] = True  # summarised in one line instead of transformers' table
    try:
        with quiet_load_report():
            model, loading_info = factory.from_pretrained(str(path), **kwargs, **settings)
    except (OSError, ValueError, TypeError) as error:
        raise ConfigurationError(f"cannot load a {auto_class} from {path}: {error}", key=key) from None
    log_load_summary(type(model).__name__, name, loading_info)
    return model


def model_from_config(auto_class: str, config: Mapping[str, Any], settings: Mapping[str, Any]) -> torch.nn.Module:
    """`transformers.<auto_class>` with random weights, from a config dict holding its `model_type`."""
    transformers = import_transformers_offline()
    values = dict(config)
    model_type = values.pop("model_type", None)
    if not isinstance(model_type, str):
        raise ConfigurationError(f"required, a transformers model type such as 'bert'; found {model_type!r}.", key="config.model_type")
    try:
        model_config = transformers.AutoConfig.for_model(model_type, **values, **settings)
    except (KeyError, ValueError, TypeError) as error:
        raise ConfigurationError(f"cannot make a {model_type!r} config: {error}", key="config") from None
    try:
        return getattr(transformers, auto_class).from_config(model_config, trust_remote_code=False)
    except ValueError as error:
        raise ConfigurationError(f"{auto_class} does not take a {model_type!r} model: {error}", key="config") from None


def freeze_parameters(module: torch.nn.Module, patterns: Sequence[str], key: str = "freeze") -> int:
    """Stop training the parameters of `module` whose names match any of the regexes `patterns`
    (searched, as `re.search`, under a time limit); a pattern that matches nothing is an error.
    Returns how many froze."""
    parameters = dict(module.named_parameters())
    frozen = 0
    for index, pattern in enumerate(patterns):
        matched = search_names(pattern, parameters, f"{key}.{index}")
        if not matched:
            raise ConfigurationError(
                f"{pattern!r} matches no parameter name (the names look like {list(parameters)[:3]}).", key=f"{key}.{index}"
            )
        for name in matched:
            if parameters[name].requires_grad:
                parameters[name].requires_grad_(False)
                frozen += 1
    return frozen


def has_weights(path: Path) -> bool:
    """Whether the directory `path` holds Hugging Face model weights."""
    return any((path / weights).is_file() for weights in WEIGHT_FILES)
