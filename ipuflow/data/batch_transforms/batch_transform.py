"""BatchTransform: a change made to every collated batch, drawing from a random stream of its own."""

from __future__ import annotations

from typing import Dict, Sequence

import numpy
import torch

Batch = Dict[str, torch.Tensor]


class BatchTransform:
    """Changes a collated batch on the host (in the data loader, or its worker processes).

    The loader gives each batch the key of its random stream: (loader seed, epoch, replica, batch
    position in the epoch). So the draws are the same for the same batch whichever process collates
    it, after a resume, and whether batches are collated ahead; they differ between batches and epochs.
    """

    def __init__(self) -> None:
        self._generator = torch.Generator()  # one, re-seeded per batch: nothing allocated per batch for it

    def generator(self, stream: Sequence[int]) -> torch.Generator:
        """The generator, seeded for the random stream `stream`."""
        seed = numpy.random.SeedSequence([int(part) for part in stream]).generate_state(1, dtype=numpy.uint64)[0]
        return self._generator.manual_seed(int(seed) >> 1)  # manual_seed takes < 2**63

    def __call__(self, batch: Batch, stream: Sequence[int]) -> Batch:
        """The changed batch (it may change `batch` in place and return it)."""
        raise NotImplementedError

    def output_fields(self) -> Sequence[str]:
        """The fields this transform adds to a batch."""
        return ()

    def __getstate__(self) -> Dict[str, object]:
        # A torch.Generator does not pickle; worker processes make their own.
        state = dict(self.__dict__)
        state.pop("_generator")
        return state

    def __setstate__(self, state: Dict[str, object]) -> None:
        self.__dict__.update(state)
        self._generator = torch.Generator()
