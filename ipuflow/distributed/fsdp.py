"""`sharding: "fsdp"`: the model's parameters, gradients and optimizer state sharded across the
ranks with FSDP2 (`torch.distributed.fsdp.fully_shard`), for models that do not fit one device.

Every layer of each `nn.ModuleList` (a transformer's blocks) is a unit of its own, then the whole
model: a unit's parameters are gathered for its forward and backward and freed after. What the
rest of ipuflow sees is unchanged: the model's `state_dict()` is the full state (gathered, on rank
0; every rank calls it together) and `load_state_dict` takes a full state, so checkpoints, best
weights and archives stay the same safetensors files as without sharding.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator

import torch

from ipuflow.distributed.collectives import broadcast_tensors_from_primary
from ipuflow.distributed.process_group import DistributedContext

from ipuflow.distributed.data_parallel import SHARDED_MARK

_NAMES = "_ipuflow_parameter_names"


def _full_state_options(**extra: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **extra)


def shard_model(model: torch.nn.Module, context: DistributedContext) -> torch.nn.Module:
    """Shard `model` in place (its class becomes an FSDP module) and return it. Every rank starts
    from rank 0's weights and buffers."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # FSDP's default mesh is a CUDA one whenever CUDA is present, whatever device the executor chose
    # (on a one-GPU machine rank 1 then asked for cuda:1): shard on the device the model is on.
    device = next(model.parameters()).device
    if device.type == "cuda":
        torch.cuda.set_device(device)  # FSDP puts shards on the current CUDA device
    mesh = init_device_mesh(device.type, (context.world_size,))
    broadcast_tensors_from_primary([tensor.data for tensor in (*model.parameters(), *model.buffers())])
    # The names of the original parameters, for the optimizer built over them (see adopt_sharded_parameters).
    setattr(model, _NAMES, {id(parameter): name for name, parameter in model.named_parameters()})
    for module in list(model.modules()):
        if isinstance(module, torch.nn.ModuleList):
            for layer in module:
                if any(True for _ in layer.parameters()):
                    fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    setattr(model, SHARDED_MARK, True)
    _use_full_state_dicts(model)
    return model


def _use_full_state_dicts(model: torch.nn.Module) -> None:
    """Make `model.state_dict()` gather the full state (on rank 0; empty elsewhere) and
    `model.load_state_dict(full)` shard a full state, as the rest of ipuflow expects (torch's own
    patch, which its state-dict functions recognise)."""
    from torch.distributed.checkpoint.state_dict import _patch_model_state_dict

    _patch_model_state_dict(model, options=_full_state_options(cpu_offload=True))


def adopt_sharded_parameters(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> None:
    """Point `optimizer`'s parameter groups at the sharded parameters that replaced `model`'s
    (built before sharding, it holds the originals; it has no state yet)."""
    names: Dict[int, str] = getattr(model, _NAMES)
    sharded = dict(model.named_parameters())
    for param_group in optimizer.param_groups:
        param_group["params"] = [sharded[names[id(parameter)]] for parameter in param_group["params"]]


@contextlib.contextmanager
def fsdp_no_sync(model: torch.nn.Module) -> Iterator[None]:
    """Accumulate gradients without reduce-scattering them (FSDP2's gradient sync off)."""
    model.set_requires_gradient_sync(False)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)  # type: ignore[operator]


def use_full_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Make `optimizer.state_dict()` the full state keyed by parameter name (gathered on rank 0;
    every rank calls it together) and `load_state_dict` shard such a state."""
    from torch.distributed.checkpoint.state_dict import _patch_optimizer_state_dict

    _patch_optimizer_state_dict(model, optimizers=(optimizer,), options=_full_state_options(cpu_offload=True))
