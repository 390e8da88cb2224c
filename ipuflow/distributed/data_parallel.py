"""The gradient reduction of a replica group: the model wrapped with DDP (or sharded with FSDP2),
and the context that keeps accumulation micro-batches from reducing.

Why DDP with ``no_sync`` rather than an explicit all-reduce at the update: DDP reduces gradient
buckets while backward is still running on the last micro-batch of an update (communication
overlaps compute), handles parameters that receive no gradient (``find_unused_parameters``), and
is what the FSDP and compile stacks build on. Inside ``no_sync`` gradients accumulate locally, so
the reduction happens exactly once per optimizer update, on the last micro-batch, as on IPU
replicas. DDP averages over ranks; each rank divides its loss by its own micro-batches per update
(gradient accumulation), so the result is the mean over ``GA × R`` micro-batches.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, List, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.distributed.process_group import DistributedContext
from ipuflow.torch_features import FSDP2, require_torch

SHARDINGS = (None, "ddp", "fsdp")
SHARDED_MARK = "_ipuflow_fsdp"
"""Attribute set (True) on a model that `sharding: fsdp` has sharded in place."""


def require_sharding(sharding: Optional[str]) -> Optional[str]:
    """`sharding` if it is null, "ddp" or "fsdp", else a ConfigurationError naming the key."""
    if sharding not in SHARDINGS:
        raise ConfigurationError(
            f"trainer.executor.sharding: expected null or 'ddp' (replicate the model on every rank) or 'fsdp' "
            f"(shard parameters, gradients and optimizer state across ranks with FSDP2), found {sharding!r}."
        )
    if sharding == "fsdp":
        require_torch(FSDP2, "sharding 'fsdp' (FSDP2's fully_shard)", path="trainer.executor.sharding")
    return sharding


class ReplicaGroup:
    """One model's membership of the group: the module to run forward through, and `no_sync`.

    Joining makes every replica start from rank 0's weights; with FSDP the `optimizer` (built
    before, over the original parameters) is pointed at the sharded ones. Ranks other than 0 then
    continue their random numbers from the seed plus their rank, so replicas draw different dropout
    masks while rank 0 draws what one process would.
    """

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer], context: DistributedContext,
                 sharding: Optional[str], find_unused_parameters: bool) -> None:
        self.context = context
        self.sharding = sharding or "ddp"
        self.model = model
        if self.sharding == "fsdp":
            from ipuflow.distributed.fsdp import adopt_sharded_parameters, shard_model, use_full_optimizer_state

            self.module: torch.nn.Module = shard_model(model, context)
            if optimizer is not None:
                adopt_sharded_parameters(optimizer, model)
                # Checkpoints then hold the full optimizer state (by parameter name), written by rank 0.
                use_full_optimizer_state(model, optimizer)
        else:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [context.device.index] if context.device.type == "cuda" else None
            # DDP broadcasts rank 0's parameters and buffers now, so every replica starts alike.
            self.module = DistributedDataParallel(
                model, device_ids=device_ids, gradient_as_bucket_view=True,
                find_unused_parameters=find_unused_parameters,
            )
        if context.rank > 0:
            torch.manual_seed(torch.initial_seed() + context.rank)

    def no_sync(self) -> ContextManager[Any]:
        """Accumulate this micro-batch's gradients locally (no reduction)."""
        if self.sharding == "fsdp":
            from ipuflow.distributed.fsdp import fsdp_no_sync

            return fsdp_no_sync(self.model)
        return self.module.no_sync()  # type: ignore[operator]


def update_contexts(group: Optional[ReplicaGroup], micro_batches: int) -> List[Callable[[], ContextManager[Any]]]:
    """For each micro-batch of one update, the context to run its forward and backward in: all but
    the last accumulate without reducing; the last reduces (once per update)."""
    if group is None or micro_batches == 1:
        return [contextlib.nullcontext] * micro_batches
    return [group.no_sync] * (micro_batches - 1) + [contextlib.nullcontext]


def mean_over_ranks(loss: Optional[torch.Tensor], context: Optional[DistributedContext]) -> Optional[torch.Tensor]:
    """A rank's mean loss turned into the group's mean (every rank runs as many micro-batches)."""
    if loss is None or context is None:
        return loss
    import torch.distributed as dist

    total = loss.detach().float().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.div_(context.world_size)
