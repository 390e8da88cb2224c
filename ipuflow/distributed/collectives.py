"""The few collectives the run needs beyond the gradient reduction, each a no-op in one process.

Every rank must call each of these at the same point of the run, in the same order: a call on one
rank only waits for the others until the group's timeout.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import torch

from ipuflow.distributed.process_group import current


def barrier() -> None:
    """Wait until every rank gets here."""
    context = current()
    if context is not None:
        import torch.distributed as dist

        dist.barrier()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum `tensor` over the ranks, in place (on the group's device); returns it."""
    context = current()
    if context is not None:
        import torch.distributed as dist

        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def any_rank(flags: Sequence[bool]) -> List[bool]:
    """For each flag, whether it is set on any rank (one small collective for all of them)."""
    context = current()
    if context is None:
        return list(flags)
    import torch.distributed as dist

    values = torch.tensor([1 if flag else 0 for flag in flags], dtype=torch.int32, device=context.device)
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [bool(value) for value in values.tolist()]


def broadcast_from_primary(value: Any) -> Any:
    """Rank 0's `value` (a picklable object) on every rank."""
    context = current()
    if context is None:
        return value
    import torch.distributed as dist

    holder = [value]
    dist.broadcast_object_list(holder, src=0, device=context.device)
    return holder[0]


def gather_to_primary(value: Any) -> Optional[List[Any]]:
    """Every rank's `value` (picklable), by rank, on rank 0; None on the other ranks."""
    context = current()
    if context is None:
        return [value]
    import torch.distributed as dist

    gathered: Optional[List[Any]] = [None] * context.world_size if context.is_primary else None
    dist.gather_object(value, gathered, dst=0)
    return gathered


def broadcast_tensors_from_primary(tensors: Sequence[torch.Tensor]) -> None:
    """Overwrite `tensors` on every rank with rank 0's values, in place."""
    context = current()
    if context is None:
        return
    import torch.distributed as dist

    for tensor in tensors:
        dist.broadcast(tensor, src=0)
