"""The random-number streams of the replicas that one process simulates (`replication_factor > 1`
without torchrun), so that a run debugged on one machine draws what it draws on many."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional

import torch


def _states(device: torch.device) -> Dict[str, torch.Tensor]:
    states = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def _set_states(states: Dict[str, torch.Tensor], device: torch.device) -> None:
    torch.set_rng_state(states["cpu"])
    if device.type == "cuda" and "cuda" in states:
        torch.cuda.set_rng_state(states["cuda"], device)


class ReplicaRandomStreams:
    """Replica 0 draws from the process's own torch generators; replica ``r > 0`` from a stream of its
    own that starts from the seed ``torch.initial_seed() + r``, which is what rank ``r`` re-seeds with
    when it joins the group under torchrun (`distributed.data_parallel.ReplicaGroup`). Each replica's
    micro-batches run inside `drawing_for(replica)`, so dropout masks match rank by rank."""

    def __init__(self, replicas: int, device: torch.device) -> None:
        self._device = device
        seed = torch.initial_seed()
        self._streams: List[Optional[Dict[str, torch.Tensor]]] = [None]
        for replica in range(1, replicas):
            states = {"cpu": torch.Generator().manual_seed(seed + replica).get_state()}
            if device.type == "cuda":
                states["cuda"] = torch.Generator(device=device).manual_seed(seed + replica).get_state()
            self._streams.append(states)

    @contextlib.contextmanager
    def drawing_for(self, replica: int) -> Iterator[None]:
        """Run the block on `replica`'s stream (replica 0: the process's own, untouched)."""
        stream = self._streams[replica]
        if stream is None:
            yield
            return
        own = _states(self._device)
        _set_states(stream, self._device)
        try:
            yield
        finally:
            self._streams[replica] = _states(self._device)
            _set_states(own, self._device)

    def state_dict(self) -> List[Optional[Dict[str, Any]]]:
        """Every replica's stream (None for replica 0, whose state the executor saves as the process's)."""
        return [None if stream is None else dict(stream) for stream in self._streams]

    def load_state_dict(self, streams: List[Optional[Dict[str, Any]]]) -> None:
        """Continue from what `state_dict` returned (a checkpoint of as many replicas)."""
        if len(streams) == len(self._streams):
            self._streams = [None if stream is None else dict(stream) for stream in streams]
