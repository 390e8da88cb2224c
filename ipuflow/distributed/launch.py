"""Running `ipuflow train` as one rank of a torchrun group: the config is checked against the
launch on every rank before anything is read, then the group is started for the command."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, Iterator, Optional

import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.distributed.data_parallel import require_sharding
from ipuflow.distributed.process_group import (
    DistributedContext, choose_backend, launched_by_torchrun, refuse_fixed_cuda_device, start, stop,
)
from ipuflow.distributed.replicas import REPLICATION_KEYS, resolve_replication_factor


def executor_block(params: Params) -> Dict[str, Any]:
    """The config's `trainer.executor` block as a plain dict (empty when absent)."""
    trainer = params.get("trainer")
    executor = trainer.get("executor") if isinstance(trainer, Params) else None
    if isinstance(executor, str):
        return {"type": executor}
    return executor.as_dict() if isinstance(executor, Params) else {}


def check_config_for_launch(params: Params, world_size: int) -> Dict[str, Any]:
    """Refuse, before anything is read, a config that cannot run as `world_size` replicas:
    another executor than ``native``, a replication factor that is neither 1 nor the world size,
    an unknown backend or sharding, or a fixed ``cuda:N`` device. Returns the executor block."""
    block = executor_block(params)
    kind = block.get("type", "native")
    if kind != "native":
        raise ConfigurationError(
            f"trainer.executor.type: {kind!r} cannot run under torchrun; only the native executor (CPU or CUDA) "
            "runs data-parallel across processes (poptorch replicates across IPUs within one process: set "
            "replication_factor and start one process)."
        )
    for key in REPLICATION_KEYS:
        if key in block:
            resolve_replication_factor(key, block[key], world_size)
    if require_sharding(block.get("sharding")) == "fsdp":
        trainer = params.get("trainer")
        if isinstance(trainer, Params) and trainer.get("moving_average") is not None:
            raise ConfigurationError(
                "trainer.moving_average cannot be used with trainer.executor.sharding 'fsdp': the average would need "
                "a full copy of the weights on every rank, which sharding avoids."
            )
    device = block.get("device", "auto")
    refuse_fixed_cuda_device(device)
    choose_backend(block.get("distributed_backend", "auto"), _uses_cuda(device))
    return block


def _uses_cuda(device: Any) -> bool:
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


@contextlib.contextmanager
def replica_group_for(params: Params) -> Iterator[Optional[DistributedContext]]:
    """Inside torchrun, the group for this config (checked first), left at the end; else None."""
    if not launched_by_torchrun():
        yield None
        return
    block = check_config_for_launch(params, int(os.environ["WORLD_SIZE"]))
    context = start(block.get("distributed_backend", "auto"), _uses_cuda(block.get("device", "auto")))
    completed = False
    try:
        yield context  # callbacks' is_primary (training.trainer_state) asks this group
        completed = True
    finally:
        stop(completed)


def refuse_under_torchrun(what: str, advice: str = "run it as one process, without torchrun") -> None:
    """A usage error if this process was started by torchrun: `what` runs in one process only."""
    if launched_by_torchrun():
        raise ConfigurationError(f"{what} does not run under torchrun (only `ipuflow train` does); {advice}.")
