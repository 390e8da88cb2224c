"""Turning indexed instances into fixed-shape tensors, a whole batch at a time.

At construction every field's values are packed into numpy arrays once (scalars into one array,
token-id lists into one flat array with offsets, float vectors into one matrix), so that a batch is
a few vectorised gathers rather than a Python loop over instances and elements.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy
import torch

from ipuflow.config import ConfigurationError

IGNORE_LABEL = -100
"""Label value of rows that the loader padded onto the batch axis: loss and metrics skip them
(torch's `cross_entropy` ignores it by default)."""
INT_SCALAR = "int scalar"
FLOAT_SCALAR = "float scalar"
INT_SEQUENCE = "token-id list"
FLOAT_VECTOR = "float vector"
METADATA = "metadata"


def field_kind(value: Any) -> str:
    """Which of the indexed-instance value kinds `value` is (see the shared data contract)."""
    if type(value) is int or isinstance(value, (bool, numpy.bool_)):
        return INT_SCALAR
    if isinstance(value, numbers.Integral):
        return INT_SCALAR
    if isinstance(value, numbers.Real):
        return FLOAT_SCALAR
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, numpy.ndarray):
        if value.dtype.kind in "iu" and value.ndim == 1:
            return INT_SEQUENCE
        if value.dtype.kind in "fiub":
            return FLOAT_VECTOR
        return METADATA
    if isinstance(value, (list, tuple)):
        # Plain ints first: the ABC check below costs a microsecond a token, which adds up per batch.
        if all(type(item) is int for item in value):
            return INT_SEQUENCE
        if all(isinstance(item, numbers.Integral) and not isinstance(item, bool) for item in value):
            return INT_SEQUENCE
        if all(isinstance(item, numbers.Real) for item in value):
            return FLOAT_VECTOR
    return METADATA


@dataclass
class PackedField:
    """One field's values for every instance, packed for vectorised gathering."""

    name: str
    kind: str
    values: Optional[numpy.ndarray] = None  # scalars [N]; float vectors [N, ...]; flat token ids
    offsets: Optional[numpy.ndarray] = None  # token-id lists: start of each instance in `values`
    lengths: Optional[numpy.ndarray] = None  # token-id lists: length of each instance
    lookup: Optional[numpy.ndarray] = None  # maps stored ids to vocabulary ids (columnar datasets)


def _kinds(instances: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """The kind of every field, checked to agree across instances (empty lists defer to others)."""
    kinds: Dict[str, str] = {}
    names = list(instances[0].keys())
    for position, instance in enumerate(instances):
        if list(instance.keys()) != names and set(instance.keys()) != set(names):
            raise ConfigurationError(
                f"instance {position} has fields {sorted(instance)}, but instance 0 has "
                f"{sorted(names)}; every instance needs the same fields.",
                key="instances",
            )
        for name in names:
            value = instance[name]
            if isinstance(value, (list, tuple)) and len(value) == 0:
                continue  # an empty list fits either list kind
            kind = field_kind(value)
            known = kinds.get(name)
            if known is None:
                kinds[name] = kind
            elif known != kind and not {known, kind} <= {INT_SCALAR, FLOAT_SCALAR}:
                raise ConfigurationError(
                    f"field {name!r} is a {known} in earlier instances but a {kind} "
                    f"in instance {position} ({value!r:.60}).",
                    key="instances",
                )
            elif known != kind:
                kinds[name] = FLOAT_SCALAR  # ints and floats mixed: promote
    for name in names:
        kinds.setdefault(name, INT_SEQUENCE)
    return kinds


def pack_fields(instances: Sequence[Mapping[str, Any]]) -> List[PackedField]:
    """Pack every non-metadata field of `instances` into numpy arrays (a columnar dataset is
    packed already, and its memory-mapped arrays are used as they are)."""
    if callable(getattr(instances, "packed_fields", None)):
        return instances.packed_fields()  # type: ignore[attr-defined]
    packed = []
    for name, kind in _kinds(instances).items():
        if kind == METADATA:
            continue
        column = [instance[name] for instance in instances]
        if kind == INT_SCALAR:
            packed.append(PackedField(name, kind, values=numpy.asarray(column, dtype=numpy.int64)))
        elif kind == FLOAT_SCALAR:
            packed.append(PackedField(name, kind, values=numpy.asarray(column, dtype=numpy.float32)))
        elif kind == FLOAT_VECTOR:
            vectors = [numpy.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value, dtype=numpy.float32) for value in column]
            shapes = {vector.shape for vector in vectors}
            if len(shapes) != 1:
                raise ConfigurationError(
                    f"field {name!r} holds float vectors of different shapes "
                    f"{sorted(shapes)[:4]}; float vectors must have one fixed shape.",
                    key="instances",
                )
            packed.append(PackedField(name, kind, values=numpy.stack(vectors)))
        else:
            arrays = [numpy.asarray(value, dtype=numpy.int64).reshape(-1) for value in column]
            lengths = numpy.fromiter((len(array) for array in arrays), dtype=numpy.int64, count=len(arrays))
            offsets = numpy.zeros(len(arrays), dtype=numpy.int64)
            numpy.cumsum(lengths[:-1], out=offsets[1:])
            flat = numpy.concatenate(arrays) if arrays else numpy.zeros(0, dtype=numpy.int64)
            packed.append(PackedField(name, kind, values=flat, offsets=offsets, lengths=lengths))
    return packed


PADDINGS = ("longest", "fixed")
"""How token-id lists are padded: to the batch's own longest list, or to fixed shapes."""


# Per-batch padded lengths are rounded up to this multiple until an executor names its own: 8 suits
# CUDA's tensor cores and transformers' DataCollatorWithPadding under half precision.
DEFAULT_LENGTH_MULTIPLE = 8


class Collator:
    """Gathers packed fields into a combined batch.

    Token-id lists are padded with 0 (and truncated), each with a bool ``<name>_mask``:

    * `padding` "fixed": to `max_length`, to the smallest of `length_buckets` that holds the batch's
      longest list (the largest bucket truncates), or, with neither, to the longest list in the data set;
    * `padding` "longest": to the batch's longest list rounded up to a multiple of `pad_to_multiple_of`
      (so few distinct shapes arise), truncated at `max_length` (or the largest bucket).
    """

    def __init__(self, fields: List[PackedField], max_length: Optional[int], length_buckets: Optional[List[int]],
                 padding: str = "fixed", pad_to_multiple_of: int = 1) -> None:
        self.fields = fields
        self.max_length = max_length
        self.length_buckets = sorted(length_buckets) if length_buckets else None
        self.padding = padding
        self.pad_to_multiple_of = pad_to_multiple_of
        self._dataset_longest = {
            field.name: max(1, int(field.lengths.max()) if len(field.lengths) else 1)  # type: ignore[union-attr,arg-type]
            for field in fields
            if field.kind == INT_SEQUENCE
        }

    @property
    def truncation(self) -> Optional[int]:
        """The length token-id lists are cut at: `max_length`, else the largest bucket, else none."""
        if self.max_length is not None:
            return self.max_length
        return self.length_buckets[-1] if self.length_buckets else None

    def padded_length(self, field: PackedField, indices: numpy.ndarray) -> int:
        """The padded length of `field` for a batch of `indices`."""
        if self.padding == "longest":
            longest = int(field.lengths[indices].max()) if len(indices) else 0  # type: ignore[index]
            multiple = self.pad_to_multiple_of
            # At least one multiple: a batch of empty lists still gets a sequence axis to attend over.
            length = max(-(-longest // multiple) * multiple, multiple)
            limit = self.truncation
            return length if limit is None else min(length, limit)
        if self.max_length is not None:
            return self.max_length
        if self.length_buckets is not None:
            longest = int(field.lengths[indices].max()) if len(indices) else 0  # type: ignore[index]
            for bucket in self.length_buckets:
                if bucket >= longest:
                    return bucket
            return self.length_buckets[-1]
        return self._dataset_longest[field.name]

    def batch_lengths(self, indices: numpy.ndarray) -> Dict[str, int]:
        """The padded length of every token-id field for a batch of `indices`."""
        return {field.name: self.padded_length(field, indices) for field in self.fields if field.kind == INT_SEQUENCE}

    def sequence_lengths(self) -> List[Dict[str, int]]:
        """Every combination of padded lengths that fixed-shape batches can have, one dict per combination."""
        sequences = [field.name for field in self.fields if field.kind == INT_SEQUENCE]
        if self.max_length is not None or self.length_buckets is None:
            return [{name: self.max_length or self._dataset_longest[name] for name in sequences}]
        return [dict(zip(sequences, lengths)) for lengths in itertools.product(self.length_buckets, repeat=len(sequences))]

    def __call__(self, indices: numpy.ndarray, rows: int, lengths: Optional[Dict[str, int]] = None) -> Dict[str, torch.Tensor]:
        """The batch of instances `indices`, padded on the batch axis to `rows` rows.

        Padding rows are zeros (masks False) with int scalar fields set to `IGNORE_LABEL`, so
        models leave them out of the loss and metrics. `lengths` forces the padded length of token-id
        fields (for compiling an executor for every shape).
        """
        batch: Dict[str, torch.Tensor] = {}
        real = len(indices)
        for field in self.fields:
            if field.kind == INT_SEQUENCE:
                length = lengths[field.name] if lengths is not None else self.padded_length(field, indices)
                kept = numpy.minimum(field.lengths[indices], length)  # type: ignore[index]
                positions = numpy.arange(length, dtype=numpy.int64)
                mask = numpy.zeros((rows, length), dtype=bool)
                mask[:real] = positions[None, :] < kept[:, None]
                gather = field.offsets[indices][:, None] + positions[None, :]  # type: ignore[index]
                tokens = numpy.zeros((rows, length), dtype=numpy.int64)
                if field.values.size:  # type: ignore[union-attr]
                    # Positions past an instance's end (masked out below) must still index the
                    # values; offsets and positions are never negative, so only the top is bounded
                    # (numpy.minimum, not numpy.clip: clip's Python wrapper costs 40 µs a batch).
                    numpy.minimum(gather, field.values.size - 1, out=gather)  # type: ignore[union-attr]
                    ids = field.values[gather]  # type: ignore[index]
                    if field.lookup is not None:
                        ids = field.lookup[ids]
                    tokens[:real] = numpy.where(mask[:real], ids, 0)
                batch[field.name] = torch.from_numpy(tokens)
                batch[f"{field.name}_mask"] = torch.from_numpy(mask)
            else:
                values = field.values[indices]  # type: ignore[index]
                if field.lookup is not None:
                    values = field.lookup[values]
                if rows > real:
                    filler = IGNORE_LABEL if field.kind == INT_SCALAR else 0
                    padding = numpy.full((rows - real,) + values.shape[1:], filler, dtype=values.dtype)
                    values = numpy.concatenate([values, padding])
                batch[field.name] = torch.from_numpy(numpy.ascontiguousarray(values))
        return batch
