"""How replicas map to ranks: the world size is the replication factor, and each rank runs one
replica, so it takes that replica's rows of every combined batch."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ipuflow.config import ConfigurationError

REPLICATION_KEYS = ("replication_factor", "inference_replication_factor")


def resolve_replication_factor(key: str, value: Optional[int], world_size: int) -> int:
    """The replication factor of a run with `world_size` ranks: `value` must be the world size, or
    1 (or unset), which means "the world size"; anything else is a configuration error."""
    if value is None or value == 1 or value == world_size:
        return world_size
    raise ConfigurationError(
        f"trainer.executor.{key}: {value!r} replicas were configured, but torchrun started {world_size} processes. "
        f"Under torchrun each process runs one replica, so the world size is the replication factor: set {key} "
        f"to {world_size} (or 1, which takes the world size), or start {value!r} processes (--nproc_per_node "
        "times --nnodes)."
    )


def replicated_options(options: Dict[str, Any], world_size: int) -> Dict[str, Any]:
    """Executor options with both replication factors set to the world size (checked)."""
    resolved = dict(options)
    for key in REPLICATION_KEYS:
        resolved[key] = resolve_replication_factor(key, options.get(key), world_size)
    return resolved


def replica_positions(micro_batch: int, replicas: int, replica: int, rows: int) -> "Any":
    """The positions, within a combined batch of `rows` rows split ``[steps][replica][micro_batch]``,
    of `replica`'s rows, in its own ``[steps][micro_batch]`` order."""
    import numpy

    if rows % (micro_batch * replicas) != 0:
        raise ValueError(
            f"A combined batch of {rows} rows cannot be split into {replicas} replicas of micro-batches of "
            f"{micro_batch} rows."
        )
    return numpy.arange(rows).reshape(-1, replicas, micro_batch)[:, replica, :].reshape(-1)
