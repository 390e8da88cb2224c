"""Data-parallel training across processes launched by torchrun: one process (rank) per replica.

`process_group` starts and ends the group from torchrun's environment; `replicas` maps replicas
to ranks and rows of a combined batch to replicas; `collectives` holds the small agreements the
run needs; `data_parallel` wraps a model for the gradient reduction (DDP, or FSDP2 sharding);
`launch` checks a config against the launch and runs a command inside the group; `rank_output`
keeps output and writes to rank 0.
"""

from ipuflow.distributed.process_group import (
    DistributedContext, current, environment_rank, is_primary, launched_by_torchrun,
)

__all__ = ["DistributedContext", "current", "environment_rank", "is_primary", "launched_by_torchrun"]
