"""What `--dry-run` reports of a poptorch executor's IPU settings, so that a user can confirm what
the executor block and its `ipu_config` file set: per mode, the IPUs of a replica, the memory
proportion of each, half partials, the executable cache, and where each part of the model goes.

It is computed from the settings alone (no poptorch), with the executor's checks, so a dry run without
the Poplar SDK refuses a placement that the executor would refuse.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Mapping

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution.ipu_config import IpuPlacement, resolve_placements
from ipuflow.execution.pipeline_layout import describe_placement, model_layout, place_layout
from ipuflow.execution.poptorch import PoptorchExecutor, model_blocks, resolve_layer_list

_SHARED_SETTINGS = ("enable_half_partials", "executable_cache_dir", "optimizer_state_offchip",
                    "replicated_tensor_sharding", "recompute_checkpoint_every_layer", "pipeline_layers")
"""The IPU settings that do not differ between training and inference, reported as they are."""


def poptorch_settings(block: Mapping[str, Any]) -> Dict[str, Any]:
    """The poptorch executor's own (IPU) arguments: those in `block`, the rest at their defaults."""
    parameters = inspect.signature(PoptorchExecutor.__init__).parameters
    defaults = {name: parameter.default for name, parameter in parameters.items()
                if parameter.default is not inspect.Parameter.empty and name != "ipu_config"}
    return {name: block.get(name, default) for name, default in defaults.items()}


def ipu_plan(model: torch.nn.Module, block: Mapping[str, Any]) -> Dict[str, Any]:
    """The IPU settings of a poptorch executor `block` (its file's keys merged in) and the placement of
    `model` for training and inference; a ConfigurationError (a relative key) for what the executor refuses."""
    settings = poptorch_settings(block)
    training, inference = resolve_placements(
        settings["layers_per_ipu"], settings["inference_layers_per_ipu"], settings["ipus_per_replica"],
        settings["inference_ipus_per_replica"], settings["matmul_proportion"], settings["inference_matmul_proportion"],
        settings["embedding_serialization_factor"], settings["inference_embedding_serialization_factor"],
    )
    plan: Dict[str, Any] = {key: settings[key] for key in _SHARED_SETTINGS}
    plan["training"] = _mode_plan(model, training, settings, "layers_per_ipu")
    plan["inference"] = _mode_plan(model, inference, settings, "inference_layers_per_ipu")
    return plan


def _mode_plan(model: torch.nn.Module, placement: IpuPlacement, settings: Mapping[str, Any], key: str) -> Dict[str, Any]:
    return {"ipus_per_replica": placement.ipus_per_replica, "layers_per_ipu": placement.layers_per_ipu,
            "available_memory_proportion": {f"IPU{index}": value for index, value in enumerate(placement.matmul_proportion)},
            "placement": _placement_lines(model, placement, settings, key)}


def _placement_lines(model: torch.nn.Module, placement: IpuPlacement, settings: Mapping[str, Any], key: str) -> List[str]:
    """Where each placed part of the model runs, as the poptorch executor places it."""
    lines = [f"{user_id or type(module).__name__} (ipu_ops.BeginBlock in the model): IPU {ipu}"
             for module, (user_id, ipu) in model_blocks(model)]
    path = settings["pipeline_layers"]
    if path:
        layers = resolve_layer_list(model, path)
        lines += [f"{path}.{index}: IPU {ipu}" for index, ipu in enumerate(placement.layer_ipus(len(layers), key))]
    if lines:
        return lines
    if placement.ipus_per_replica == 1 and not settings["recompute_checkpoint_every_layer"]:
        return ["the whole model: IPU 0"]
    layout = model_layout(model)
    if layout is None:
        raise ConfigurationError(
            f"a replica spans {placement.ipus_per_replica} IPUs (or every layer is checkpointed), and the model does "
            "not say how it splits into layers: give the dotted path of its layer list, e.g. \"encoder.layers\" (or "
            "place blocks in the model with ipu_ops.BeginBlock).",
            key="pipeline_layers",
        )
    return describe_placement(place_layout(layout, placement, key), layout.layers)

