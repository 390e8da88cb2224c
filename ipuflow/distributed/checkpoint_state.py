"""What a checkpoint keeps per rank: the one shared model and optimizer state is rank 0's, but each
rank has its own random-number streams (dropout), its own rows' metric state and its callbacks'
state. Rank 0 writes them all, in a list by rank; on resume each rank takes its own back."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ipuflow.config import ConfigurationError
from ipuflow.distributed.collectives import gather_to_primary
from ipuflow.distributed.process_group import current

RANKS_KEY = "ranks"
PER_RANK_KEYS = ("rng", "model_metrics", "callbacks")


def _own_part(training_state: Dict[str, Any]) -> Dict[str, Any]:
    part = {key: training_state.get(key) for key in PER_RANK_KEYS}
    executor = training_state.get("executor")
    part["executor_rng"] = executor.get("rng") if isinstance(executor, dict) else None
    return part


def with_rank_states(training_state: Dict[str, Any]) -> Dict[str, Any]:
    """`training_state` with every rank's own part added under ``ranks`` (on rank 0; every rank
    calls this together). Unchanged in one process."""
    if current() is None:
        return training_state
    gathered: Optional[List[Dict[str, Any]]] = gather_to_primary(_own_part(training_state))
    if gathered is None:
        return training_state
    return {**training_state, RANKS_KEY: gathered}


def _processes(count: int) -> str:
    return "one process" if count == 1 else f"{count} processes (ranks)"


def adopt_own_rank_state(training_state: Dict[str, Any]) -> Dict[str, Any]:
    """A loaded training state with this rank's own part in place of rank 0's. A checkpoint
    written by another number of ranks is refused: the replicas would not continue as they were."""
    ranks = training_state.get(RANKS_KEY)
    context = current()
    world_size = 1 if context is None else context.world_size
    written = 1 if ranks is None else len(ranks)
    if written != world_size:
        # Either way the replicas' random streams and data shards would not continue as they were.
        raise ConfigurationError(
            f"The checkpoint was written by {_processes(written)}, and this run has {_processes(world_size)}: resume "
            "a run with as many processes as it was started with (torchrun --nproc-per-node), or start a new run."
        )
    if context is None or ranks is None:
        return training_state  # one process, then and now
    own = ranks[context.rank]
    state = {**training_state, **{key: own[key] for key in PER_RANK_KEYS}}
    if isinstance(state.get("executor"), dict):
        state["executor"] = {**state["executor"], "rng": own["executor_rng"]}
    return state
