"""A metric's accumulated counts summed over the ranks of a torchrun group."""

from __future__ import annotations

import torch

from ipuflow.distributed import current
from ipuflow.distributed.collectives import all_reduce_sum


def summed_over_ranks(counts: torch.Tensor) -> torch.Tensor:
    """`counts` summed over the ranks, as a copy on the group's device; `counts` itself in one process.

    Under torchrun every rank must call this at the same point (it is one all-reduce)."""
    context = current()
    if context is None:
        return counts
    return all_reduce_sum(counts.to(context.device, copy=True))
