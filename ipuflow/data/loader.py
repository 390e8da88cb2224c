"""The data loader: indexed instances → combined batches, one per executor host call, padded to the
batch's own longest list or to fixed shapes, as the executor needs."""

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
from ipuflow.data.collate import DEFAULT_LENGTH_MULTIPLE, INT_SEQUENCE, PADDINGS, Collator, pack_fields
from ipuflow.data.length_grouping import LENGTH_GROUPINGS, grouped_order
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

    def set_fixed_shapes(self, reason: Optional[str]) -> None:
        """Fit the padding to the executor: `reason` says why it needs fixed input shapes, None when it
        runs any sequence length (`executor.prepare` calls this). A loader that pads to fixed shapes
        whatever the executor needs leaves this as it is."""

    def set_length_multiple(self, multiple: int) -> None:
        """Use the executor's preferred multiple for per-batch padded lengths (`executor.prepare` calls
        this); a loader whose multiple is configured, or that pads to fixed shapes, keeps its own."""

    @property
    def pads_to_longest(self) -> bool:
        """Whether each combined batch is padded to its own longest list (lengths vary between batches)."""
        return False

    def padding_plan(self) -> Dict[str, Any]:
        """How token-id lists are padded, for the `--dry-run` plan and the log."""
        return {"padding": "fixed"}

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


def _check_lengths(max_length: Optional[int], length_buckets: Optional[List[int]]) -> None:
    validators.positive_int("max_length", max_length, optional=True)
    if length_buckets is not None:
        if max_length is not None:
            raise ConfigurationError(
                "give either max_length or length_buckets, not both "
                f"(found max_length={max_length}, length_buckets={length_buckets}).",
                key="length_buckets",
            )
        validators.positive_ints("length_buckets", length_buckets)


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
    """Cuts the data into combined batches of one size and pads token-id lists, by `padding`:

    * ``auto`` (default): what the executor needs, set by `executor.prepare`: ``longest`` for the
      native executor running eagerly, ``fixed`` for one that compiles for fixed shapes (poptorch,
      native with `compile`, ONNX Runtime); ``fixed`` until an executor prepares the loader;
    * ``longest``: each combined batch to its own longest list, rounded up to a multiple of
      `pad_to_multiple_of` (by default the executor's: 8 on CUDA, where tensor cores take multiples
      of 8, 1 on CPU, where every padded position costs time); `max_length` (or the largest of
      `length_buckets`) truncates;
    * ``fixed``: to `max_length`, to the nearest of a few `length_buckets`, or to the longest list
      of the data set.

    Other settings:

    * `shuffle`: a new order each epoch from a generator seeded with (`seed`, epoch), so a resumed
      run sees the same order; with `length_grouping` (``bucket``: AllenNLP's bucket sampler, by
      `sorting_keys` with `padding_noise`; ``group_by_length``: the Hugging Face Trainer's) the
      shuffled epoch is ordered so that each combined batch holds lists of similar length;
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
        padding: str = "auto",
        pad_to_multiple_of: Optional[int] = None,
        length_grouping: Optional[str] = None,
        sorting_keys: Optional[List[str]] = None,
        padding_noise: float = 0.1,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        """padding: auto (what the executor needs), longest (each batch to its own longest list) or fixed.
        pad_to_multiple_of: under longest padding, round each batch's length up to a multiple of this (default: the executor's).
        length_grouping: with shuffle, batch lists of similar length: bucket (AllenNLP) or group_by_length (Trainer).
        sorting_keys: the token-id fields whose lengths group instances (default: the one with the longest lists).
        padding_noise: bucket grouping: each length is varied by up to this fraction of itself before sorting.
        """
        validators.positive_int("batch_size", batch_size)
        validators.non_negative_int("num_workers", num_workers)
        validators.non_negative_int("seed", seed)
        _check_lengths(max_length, length_buckets)
        validators.choice("padding", padding, ("auto",) + PADDINGS)
        if pad_to_multiple_of is not None:
            validators.positive_int("pad_to_multiple_of", pad_to_multiple_of)
        validators.choice("length_grouping", length_grouping, LENGTH_GROUPINGS, optional=True)
        validators.non_negative_number("padding_noise", padding_noise)
        _require_instances(instances)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.pad_on_batch_axis = pad_on_batch_axis
        self.num_workers = num_workers
        self.seed = seed
        self.padding = padding
        self.length_grouping = length_grouping
        self.padding_noise = padding_noise
        self._size = len(instances)
        self._collator = Collator(pack_fields(instances), max_length, list(length_buckets) if length_buckets else None,
                                  "longest" if padding == "longest" else "fixed", pad_to_multiple_of or DEFAULT_LENGTH_MULTIPLE)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.sorting_keys = self._sorting_keys(sorting_keys)
        self._shapes_reason: Optional[str] = None
        self._fitted = False
        self._factor = 1
        self._epoch = 0
        self._warned_short_batch = False
        self._replica, self._replicas = 0, 1
        self._positions: Dict[int, numpy.ndarray] = {}

    def _sorting_keys(self, sorting_keys: Optional[List[str]]) -> Optional[List[str]]:
        """The fields `length_grouping` sorts by: the given ones, checked to be token-id lists, or the
        token-id field with the most tokens (AllenNLP guesses the longest field alike)."""
        sequences = {field.name: field for field in self._collator.fields if field.kind == INT_SEQUENCE}
        if self.length_grouping is None:
            if sorting_keys is not None:
                raise ConfigurationError("sorting_keys orders batches by length only with length_grouping "
                                         "(\"bucket\" or \"group_by_length\"); set one, or delete sorting_keys.",
                                         key="sorting_keys")
            return None
        if not sequences:
            raise ConfigurationError(key="length_grouping", expected="instances with a token-id list field to group by",
                                     found=self.length_grouping)
        if sorting_keys is None:
            return [max(sequences, key=lambda name: int(sequences[name].lengths.sum()))]  # type: ignore[union-attr]
        if not sorting_keys or any(key not in sequences for key in sorting_keys):
            raise ConfigurationError(key="sorting_keys", expected=f"a non-empty list of token-id fields ({', '.join(sequences)})",
                                     found=sorting_keys)
        return list(sorting_keys)

    def set_fixed_shapes(self, reason: Optional[str]) -> None:
        """Fit the padding to the executor: `reason` says why it needs fixed input shapes, None when it
        runs any sequence length. ``auto`` padding follows it; ``longest`` with fixed shapes is an error."""
        if reason is not None and self.padding == "longest":
            raise ConfigurationError(
                f"\"longest\" gives every batch its own length, but {reason}. Set padding to \"auto\" or "
                "\"fixed\" (with max_length or length_buckets), or use the native executor without compile.",
                key="padding",
            )
        before = self._collator.padding
        self._shapes_reason = reason
        if self.padding == "auto":
            self._collator.padding = "fixed" if reason is not None else "longest"
        if self._collator.padding != before or not self._fitted:
            self._fitted = True
            logger.info("Padding token-id lists: %s", self.padding_plan())

    def set_length_multiple(self, multiple: int) -> None:
        """Round per-batch lengths up to the executor's preferred `multiple` unless one is configured."""
        if self.pad_to_multiple_of is None:
            self._collator.pad_to_multiple_of = multiple

    @property
    def pads_to_longest(self) -> bool:
        """Whether each combined batch is padded to its own longest list (lengths vary between batches)."""
        return self._collator.padding == "longest"

    def padding_plan(self) -> Dict[str, Any]:
        """How token-id lists are padded (and why), for the `--dry-run` plan and the log."""
        collator = self._collator
        plan: Dict[str, Any] = {"padding": collator.padding, "configured": self.padding}
        if collator.padding == "longest":
            plan["pad_to_multiple_of"] = (collator.pad_to_multiple_of if self.pad_to_multiple_of is not None or self._fitted
                                          else "the executor's (8 on CUDA, 1 on CPU)")
            plan["truncate_at"] = collator.truncation
        elif collator.max_length is not None:
            plan["max_length"] = collator.max_length
        elif collator.length_buckets is not None:
            plan["length_buckets"] = collator.length_buckets
        else:
            plan["max_length"] = "the longest list in the data set"
        if self.padding != "auto":
            plan["because"] = "data_loader.padding is set"
        elif not self._fitted:
            plan["because"] = "no executor has prepared the loader yet"
        else:
            plan["because"] = self._shapes_reason or "the executor runs any sequence length"
        if self.length_grouping is not None:
            plan["length_grouping"] = self.length_grouping if self.shuffle else f"{self.length_grouping} (off: shuffle is false)"
            plan["sorting_keys"] = self.sorting_keys
        return plan

    def shape_samples(self) -> List[Batch]:
        """One combined batch of each shape this loader can yield (one per length bucket), for
        compiling an executor for all of them up front; none if it yields no batch at all."""
        rows = self.combined_batch_size
        if self._size < rows and not self.pad_on_batch_axis:
            return []  # drop_last leaves no batch; without it the only batch is short and rejected anyway
        combined = numpy.arange(min(self._size, rows))
        indices, rows = self._replica_rows(combined, rows)
        if self.pads_to_longest:  # the executor takes any length: one sample fixes the rest of the input spec
            return [self._collator(indices, rows, self._collator.batch_lengths(combined))]
        return [self._collator(indices, rows, lengths) for lengths in self._collator.sequence_lengths()]

    def with_instances(self, instances: Sequence[Mapping[str, Any]]) -> "FixedShapeDataLoader":
        """A loader with these settings (batch-size factor and epoch included) over other instances."""
        _require_instances(instances)
        other = copy.copy(self)
        other._size = len(instances)
        collator = self._collator
        other._collator = Collator(pack_fields(instances), collator.max_length, collator.length_buckets,
                                   collator.padding, collator.pad_to_multiple_of)
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

    def _combined_lengths(self, indices: numpy.ndarray) -> Optional[Dict[str, int]]:
        """Under several replicas, with lengths that depend on the batch (length buckets or padding to
        the longest), the padded lengths of the whole combined batch `indices`, so that every replica
        pads its rows as one process would; None otherwise."""
        collator = self._collator
        if self._replicas == 1 or (collator.length_buckets is None and collator.padding != "longest"):
            return None
        return collator.batch_lengths(indices)

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
        """The instance order of the current epoch (a permutation when shuffling, grouped by length
        with `length_grouping`)."""
        if not self.shuffle:
            return numpy.arange(self._size)
        rng = numpy.random.default_rng([self.seed, self._epoch])
        permutation = rng.permutation(self._size)
        if self.length_grouping is None:
            return permutation
        fields = {field.name: field for field in self._collator.fields}
        lengths = numpy.stack([fields[key].lengths for key in self.sorting_keys or ()])  # type: ignore[misc]
        return grouped_order(self.length_grouping, permutation, lengths, self.combined_batch_size, self.padding_noise, rng)

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
        lengths: List[Optional[Dict[str, int]]] = [self._combined_lengths(indices) for indices in batches]
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

