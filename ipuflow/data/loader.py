"""The data loader: indexed instances → combined batches of fixed shape, one per executor host call."""

from __future__ import annotations

import collections
import copy
import logging
import warnings
from typing import Any, ClassVar, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy
import torch

from ipuflow.config import ConfigurationError, Registrable
from ipuflow.config import validators
from ipuflow.data.collate import INT_SEQUENCE, Collator, pack_fields
from ipuflow.distributed.replicas import replica_positions

logger = logging.getLogger(__name__)

Batch = Dict[str, torch.Tensor]


RUN_BATCHES = 8
RUN_BYTES = 1 << 20
"""In-process loading collates up to RUN_BATCHES batches back to back, while they hold under RUN_BYTES."""


def _collated_in_runs(collator: Collator, batches: List[numpy.ndarray], rows: int, padded: bool,
                      lengths: List[Optional[Dict[str, int]]]) -> Iterator[Batch]:
    """The batches, collated a run of small ones at a time.

    Between two training steps the collator's code and data have left the CPU's caches: a batch of
    8×64 token ids took about 105 µs to collate right after a step, and 40 µs each in a run of 8.
    Runs stop at RUN_BYTES, so large batches (where that cost is negligible) are not held ahead. A
    batch that fails to collate ends the run; it is collated again, and fails, at its turn, so the
    batches before it are still trained on first.
    """
    def collate(index: int) -> Batch:
        return collator(batches[index], rows if padded else len(batches[index]), lengths[index])

    position, count = 0, len(batches)
    while position < count:
        run = collections.deque([collate(position)])
        held = _bytes(run[0])
        while len(run) < RUN_BATCHES and held < RUN_BYTES and position + len(run) < count:
            try:
                batch = collate(position + len(run))
            except Exception:  # raised again at its turn
                break
            run.append(batch)
            held += _bytes(batch)
        position += len(run)
        while run:
            yield run.popleft()


def _bytes(batch: Batch) -> int:
    return sum(value.numel() * value.element_size() for value in batch.values())


class DataLoader(Registrable):
    """Yields combined batches (``batch_size × batch_size_factor`` rows) for a step executor.

    The config states the micro-batch (`batch_size`); `executor.prepare(loader)` sets the executor's
    factor (`set_batch_size_factor`) before anyone asks for `len()` (host calls per epoch) or iterates.
    """

    default_implementation: ClassVar[Optional[str]] = "fixed_shape"

    @property
    def batch_size_factor(self) -> int:
        """Micro-batches per combined batch (the executor's `batch_size_factor`)."""
        raise NotImplementedError

    @property
    def combined_batch_size(self) -> int:
        """Rows per combined batch: the micro-batch size × `batch_size_factor`."""
        raise NotImplementedError

    def set_batch_size_factor(self, factor: int) -> None:
        """Use the executor's batch-size factor for the combined batches."""
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch, which (with the seed) fixes the shuffled order."""
        raise NotImplementedError

    def __len__(self) -> int:
        """Combined batches (host calls) per epoch."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Batch]:
        """The combined batches of the current epoch."""
        return self.iter_from(0)

    def iter_from(self, start: int) -> Iterator[Batch]:
        """The combined batches of the current epoch from batch `start` on (for mid-epoch resume)."""
        raise NotImplementedError

    def shape_samples(self) -> List[Batch]:
        """One combined batch of each shape this loader can yield (one per length bucket), for
        compiling an executor for all of them up front; none if it yields no batch at all."""
        raise NotImplementedError

    def select_replica(self, replica: int, replicas: int) -> None:
        """Yield only `replica`'s rows of every combined batch split among `replicas` replicas (in the
        order ``[device_iteration][accumulation][replica][micro_batch]``): what one rank of a torchrun
        group reads. `len()` and the order of the combined batches do not change."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot give one replica's rows of a combined batch, which a torchrun run "
            "needs; use the fixed_shape data loader."
        )

    def instance_indices(self) -> Iterator[numpy.ndarray]:
        """For each combined batch of the current epoch, in order, the indices (into the loader's
        instances) of the real rows it yields, which come first in the batch: what maps outputs back
        to instances (under torchrun, this replica's rows only)."""
        raise NotImplementedError(f"{type(self).__name__} cannot say which instances its batches hold, which "
                                  "post-processing needs; use the fixed_shape data loader.")

    def with_instances(self, instances: Sequence[Mapping[str, Any]]) -> "DataLoader":
        """A loader with these settings (batch-size factor included) over other instances.

        Prediction feeds inputs a combined batch at a time; this skips rebuilding the loader from
        its config for every batch.
        """
        raise NotImplementedError


def _require_instances(instances: Any) -> None:
    if not isinstance(instances, Sequence) or len(instances) == 0:
        raise ConfigurationError(
            f"expected a non-empty sequence of indexed instances, found "
            f"{type(instances).__name__} of length {len(instances) if hasattr(instances, '__len__') else '?'}.",
            key="instances",
        )


class _CombinedBatches(torch.utils.data.Dataset):
    """One epoch's combined batches as a dataset, so torch's worker processes can collate them."""

    def __init__(self, collator: Collator, batches: List[numpy.ndarray], rows: int,
                 lengths: Optional[List[Optional[Dict[str, int]]]] = None) -> None:
        self.collator = collator
        self.batches = batches
        self.rows = rows
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> Batch:
        return self.collator(self.batches[index], self.rows, None if self.lengths is None else self.lengths[index])


@DataLoader.register("fixed_shape")
class FixedShapeDataLoader(DataLoader):
    """Pads token-id lists to a fixed `max_length` (or the nearest of a few `length_buckets`) and
    cuts the data into combined batches of one size.

    * `shuffle`: a new order each epoch from a generator seeded with (`seed`, epoch), so a resumed
      run sees the same order;
    * `drop_last` (default true, as poptorch): drop the last incomplete combined batch;
    * `pad_on_batch_axis`: keep it instead, padded to full size with rows the model skips (int
      scalar fields set to -100); this wins over `drop_last`;
    * with `drop_last: false` and no padding the short last batch is yielded (after a warning) and a
      compiled executor rejects it;
    * `num_workers`: collate in that many worker processes.
    """

    def __init__(
        self,
        instances: Sequence[Mapping[str, Any]],
        batch_size: int,
        shuffle: bool = False,
        drop_last: bool = True,
        pad_on_batch_axis: bool = False,
        max_length: Optional[int] = None,
        length_buckets: Optional[List[int]] = None,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        validators.positive_int("batch_size", batch_size)
        validators.non_negative_int("num_workers", num_workers)
        validators.non_negative_int("seed", seed)
        validators.positive_int("max_length", max_length, optional=True)
        if length_buckets is not None:
            if max_length is not None:
                raise ConfigurationError(
                    "give either max_length or length_buckets, not both "
                    f"(found max_length={max_length}, length_buckets={length_buckets}).",
                    key="length_buckets",
                )
            validators.positive_ints("length_buckets", length_buckets)
        _require_instances(instances)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.pad_on_batch_axis = pad_on_batch_axis
        self.num_workers = num_workers
        self.seed = seed
        self._size = len(instances)
        self._collator = Collator(pack_fields(instances), max_length, list(length_buckets) if length_buckets else None)
        self._factor = 1
        self._epoch = 0
        self._warned_short_batch = False
        self._replica, self._replicas = 0, 1
        self._positions: Dict[int, numpy.ndarray] = {}

    def shape_samples(self) -> List[Batch]:
        """One combined batch of each shape this loader can yield (one per length bucket), for
        compiling an executor for all of them up front; none if it yields no batch at all."""
        rows = self.combined_batch_size
        if self._size < rows and not self.pad_on_batch_axis:
            return []  # drop_last leaves no batch; without it the only batch is short and rejected anyway
        indices, rows = self._replica_rows(numpy.arange(min(self._size, rows)), rows)
        return [self._collator(indices, rows, lengths) for lengths in self._collator.sequence_lengths()]

    def with_instances(self, instances: Sequence[Mapping[str, Any]]) -> "FixedShapeDataLoader":
        """A loader with these settings (batch-size factor and epoch included) over other instances."""
        _require_instances(instances)
        other = copy.copy(self)
        other._size = len(instances)
        other._collator = Collator(pack_fields(instances), self._collator.max_length, self._collator.length_buckets)
        other._warned_short_batch = False
        return other

    @property
    def length_buckets(self) -> Optional[List[int]]:
        """The sorted length buckets, if any."""
        return self._collator.length_buckets

    @property
    def batch_size_factor(self) -> int:
        """Micro-batches per combined batch (the executor's `batch_size_factor`)."""
        return self._factor

    @property
    def combined_batch_size(self) -> int:
        """Rows per combined batch: the micro-batch size × `batch_size_factor`."""
        return self.batch_size * self._factor

    @property
    def epoch(self) -> int:
        """The epoch set last (0 initially)."""
        return self._epoch

    def set_batch_size_factor(self, factor: int) -> None:
        """Use the executor's batch-size factor for the combined batches."""
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ValueError(f"set_batch_size_factor: expected an int >= 1, got {factor!r}.")
        self._factor = factor

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch, which (with the seed) fixes the shuffled order."""
        self._epoch = epoch

    def select_replica(self, replica: int, replicas: int) -> None:
        """Yield only `replica`'s rows of every combined batch split among `replicas` replicas (in the
        order ``[device_iteration][accumulation][replica][micro_batch]``): what one rank of a torchrun
        group reads. Only those rows are gathered and collated; `len()` and the order do not change."""
        if not 0 <= replica < replicas or self._factor % replicas != 0:
            raise ValueError(f"select_replica: replica {replica} of {replicas} does not fit a batch-size factor of {self._factor}.")
        self._replica, self._replicas = replica, replicas
        self._positions = {}

    def _bucket_lengths(self, indices: numpy.ndarray) -> Optional[Dict[str, int]]:
        """With length buckets, the padded lengths the whole combined batch `indices` gets, so that
        every replica pads its rows as one process would; None otherwise."""
        collator = self._collator
        if self._replicas == 1 or collator.length_buckets is None:
            return None
        return {field.name: collator.padded_length(field, indices) for field in collator.fields if field.kind == INT_SEQUENCE}

    def _replica_rows(self, indices: numpy.ndarray, rows: int) -> Tuple[numpy.ndarray, int]:
        """(this replica's instance indices, its row count) in a combined batch of `rows` rows whose
        first `len(indices)` rows are `indices` and the rest padding."""
        if self._replicas == 1:
            return indices, rows
        if len(indices) < rows and not self.pad_on_batch_axis:
            raise ValueError(
                f"The last combined batch has {len(indices)} of {rows} rows (drop_last is false and pad_on_batch_axis "
                f"is false), which cannot be split among {self._replicas} replicas; set pad_on_batch_axis: true to "
                "keep those instances, or drop_last: true."
            )
        positions = self._positions.get(rows)
        if positions is None:
            positions = self._positions[rows] = replica_positions(self.batch_size, self._replicas, self._replica, rows)
        # Padding fills the end of the combined batch, so this replica's real rows come first.
        return indices[positions[positions < len(indices)]], rows // self._replicas

    def _keeps_remainder(self) -> bool:
        return self.pad_on_batch_axis or not self.drop_last

    def __len__(self) -> int:
        """Combined batches (host calls) per epoch."""
        full, remainder = divmod(self._size, self.combined_batch_size)
        return full + (1 if remainder and self._keeps_remainder() else 0)

    def order(self) -> numpy.ndarray:
        """The instance order of the current epoch (a permutation when shuffling)."""
        if not self.shuffle:
            return numpy.arange(self._size)
        return numpy.random.default_rng([self.seed, self._epoch]).permutation(self._size)

    def _batches(self) -> List[numpy.ndarray]:
        order = self.order()
        combined = self.combined_batch_size
        batches = [order[start : start + combined] for start in range(0, self._size, combined)]
        if batches and len(batches[-1]) < combined:
            if not self._keeps_remainder():
                batches.pop()
            elif not self.pad_on_batch_axis and not self._warned_short_batch:
                self._warned_short_batch = True
                warnings.warn(
                    f"The number of instances ({self._size}) is not divisible by the combined batch size "
                    f"({combined}): with drop_last false and pad_on_batch_axis false the last combined batch "
                    f"has {len(batches[-1])} rows, which a compiled executor rejects. Set pad_on_batch_axis: "
                    "true to keep those instances.",
                    stacklevel=3,
                )
        return batches

    def instance_indices(self) -> Iterator[numpy.ndarray]:
        """For each combined batch of the current epoch, in order, the indices (into the loader's
        instances) of the real rows it yields, which come first in the batch: what maps outputs back
        to instances (under torchrun, this replica's rows only)."""
        rows = self.combined_batch_size
        for indices in self._batches():
            yield self._replica_rows(indices, rows)[0]

    def iter_from(self, start: int) -> Iterator[Batch]:
        """The combined batches of the current epoch from batch `start` on (for mid-epoch resume)."""
        batches = self._batches()[start:]
        rows = self.combined_batch_size
        padded = self.pad_on_batch_axis
        lengths: List[Optional[Dict[str, int]]] = [self._bucket_lengths(indices) for indices in batches]
        if self._replicas > 1:
            batches = [self._replica_rows(indices, rows)[0] for indices in batches]
            rows //= self._replicas
        if self.num_workers == 0:
            yield from _collated_in_runs(self._collator, batches, rows, padded, lengths)
            return
        if not padded and batches and len(batches[-1]) < rows:
            # A short last batch is collated to its own size; only the padded case fills rows.
            short = batches.pop()
            yield from self._worker_batches(batches, rows, lengths)
            yield self._collator(short, len(short))
            return
        yield from self._worker_batches(batches, rows, lengths)

    def _worker_batches(self, batches: List[numpy.ndarray], rows: int, lengths: List[Optional[Dict[str, int]]]) -> Iterator[Batch]:
        if not batches:
            return
        loader = torch.utils.data.DataLoader(
            _CombinedBatches(self._collator, batches, rows, lengths if self._replicas > 1 else None),
            batch_size=None,
            shuffle=False,
            num_workers=self.num_workers,
        )
        yield from loader

    def state_dict(self) -> Dict[str, Any]:
        """The epoch; the order depends only on (seed, epoch)."""
        return {"epoch": self._epoch}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self._epoch = int(state.get("epoch", 0))

