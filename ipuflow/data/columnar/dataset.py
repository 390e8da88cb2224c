"""A columnar dataset mapped from disk: what the data loader gathers batches from."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy
import orjson

from ipuflow.config import ConfigurationError
from ipuflow.data.collate import IGNORE_LABEL, FLOAT_VECTOR, INT_SCALAR, INT_SEQUENCE, PackedField
from ipuflow.data.columnar.builder import FORMAT_VERSION, INTS, JSON_VALUES, LABELS, META_FILE, TOKEN_IDS, TOKENS, VECTORS
from ipuflow.data.fields import Field, LabelField, MetadataField, TensorField, TextField, VocabCounter
from ipuflow.data.instance import Instance

if TYPE_CHECKING:
    from ipuflow.data.vocabulary import Vocabulary

logger = logging.getLogger(__name__)


def _map(path: Path, dtype: str, count: int, shape: Optional[List[int]] = None) -> numpy.ndarray:
    """The array in the file at `path`, memory-mapped read-only (an empty file gives an empty array)."""
    full_shape = (count, *(shape or []))
    if count == 0 or path.stat().st_size == 0:
        return numpy.zeros(full_shape, dtype=dtype)
    return numpy.memmap(path, dtype=dtype, mode="r", shape=full_shape)


class ColumnarDataset(Sequence):
    """Indexed instances held as memory-mapped columns (see `ColumnarBuilder`).

    Token and label strings are stored as type ids of their namespace; `count_vocab_items` gives the
    type counts (for building a vocabulary), and `indexed(vocab)` a view whose items and packed
    fields carry vocabulary ids. Items (`dataset[i]`) are built on demand, for inspection: the data
    loader gathers whole batches from `packed_fields()` instead.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        with open(self.directory / META_FILE, encoding="utf-8") as file:
            meta = json.load(file)
        if meta.get("format") != FORMAT_VERSION:
            raise ConfigurationError(f"{self.directory}: a columnar dataset of format {meta.get('format')}, expected {FORMAT_VERSION}.")
        self.size: int = meta["size"]
        self.fields: List[Dict[str, Any]] = meta["fields"]
        self._arrays: Dict[str, Dict[str, numpy.ndarray]] = {}
        for field in self.fields:
            prefix = self.directory / field["prefix"]
            arrays = {}
            if field["kind"] in (TOKENS, TOKEN_IDS, JSON_VALUES):
                arrays["values"] = _map(prefix.with_suffix(".values"), field["dtype"], field["tokens"])
                arrays["offsets"] = _map(prefix.with_suffix(".offsets"), "int64", self.size)
            else:
                arrays["values"] = _map(prefix.with_suffix(".values"), field["dtype"], self.size, field["shape"])
            self._arrays[field["name"]] = arrays
        self._types: Dict[str, List[str]] = {}
        self._counts: Dict[str, numpy.ndarray] = {}
        for namespace, stem in meta["namespaces"].items():
            with open(self.directory / f"{stem}.json", encoding="utf-8") as file:
                self._types[namespace] = json.load(file)
            self._counts[namespace] = numpy.fromfile(self.directory / f"{stem}.counts", dtype=numpy.int64)
        self._lookups: Optional[Dict[str, numpy.ndarray]] = None

    # ------------------------------------------------------------------------------ vocabulary

    @property
    def instance_count(self) -> int:
        """How many instances this dataset holds (what a vocabulary's log counts)."""
        return self.size

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Add every namespace's item counts to `counter`, as counting each instance would."""
        for namespace, types in self._types.items():
            counts = self._counts[namespace]
            namespace_counter = counter.setdefault(namespace, Counter())
            for token, count in zip(types, counts.tolist()):
                namespace_counter[token] += count

    def indexed(self, vocab: "Vocabulary") -> "ColumnarDataset":
        """This dataset with token and label type ids mapped to `vocab`'s ids (unknown tokens of a
        padded namespace to its OOV id; an unknown label is an error)."""
        other = object.__new__(ColumnarDataset)
        other.__dict__.update(self.__dict__)
        other._lookups = {namespace: self._namespace_lookup(vocab, namespace) for namespace in self._types}
        return other

    def first_unknown_label(self, vocab: "Vocabulary") -> Optional[Tuple[str, str, int]]:
        """(namespace, label, index of the first instance holding it) for a label of a `LabelField`
        namespace without an OOV token that `vocab` lacks, or None when it has them all."""
        for field in self.fields:
            namespace = field.get("namespace")
            if field["kind"] != LABELS or namespace not in self._types or vocab.is_padded(namespace):
                continue
            known = vocab.get_token_to_index_vocabulary(namespace) if namespace in vocab.get_namespaces() else {}
            types = self._types[namespace]
            unknown = [type_id for type_id, label in enumerate(types) if label not in known]
            if not unknown:
                continue
            values = self._arrays[field["name"]]["values"]
            holding = numpy.flatnonzero(numpy.isin(values, unknown))
            if holding.size:
                index = int(holding[0])
                return namespace, types[int(values[index])], index
        return None

    def _namespace_lookup(self, vocab: "Vocabulary", namespace: str) -> numpy.ndarray:
        """The vocabulary ids of `namespace`'s stored types. Tags of token sequences (a namespace
        only `TOKENS` fields use, without an OOV token) that the vocabulary lacks, such as a tag
        seen in test data but not in training, become `IGNORE_LABEL`, counted in a warning."""
        types = self._types[namespace]
        sequence_tags = not vocab.is_padded(namespace) and all(
            field["kind"] == TOKENS for field in self.fields if field.get("namespace") == namespace
        )
        if not sequence_tags:
            return numpy.asarray(vocab.get_token_indices(types, namespace), dtype=numpy.int64)
        known = vocab.get_token_to_index_vocabulary(namespace)
        ids = numpy.asarray([known.get(token, IGNORE_LABEL) for token in types], dtype=numpy.int64)
        unseen = {token: int(count) for token, count, id_ in zip(types, self._counts[namespace].tolist(), ids.tolist())
                  if id_ == IGNORE_LABEL and count}
        if unseen:
            listed = ", ".join(f"{token!r} x{count}" for token, count in sorted(unseen.items())[:10])
            logger.warning(
                "%s: %d occurrences of %d tags that are not in the vocabulary's %r namespace (%s); the model never "
                "predicts them: they are left out of the loss, and span metrics read them as 'O'.",
                self.directory, sum(unseen.values()), len(unseen), namespace, listed,
            )
        return ids

    # ---------------------------------------------------------------------------------- access

    def packed_fields(self) -> List[PackedField]:
        """The fields as the data loader's collator gathers them (vocabulary ids once `indexed`)."""
        packed = []
        for field in self.fields:
            arrays = self._arrays[field["name"]]
            lookup = self._lookup(field)
            if field["kind"] in (TOKENS, TOKEN_IDS):
                offsets = arrays["offsets"]
                lengths = numpy.diff(offsets, append=numpy.int64(field["tokens"])) if self.size else numpy.zeros(0, dtype=numpy.int64)
                packed.append(PackedField(field["name"], INT_SEQUENCE, values=arrays["values"], offsets=offsets,
                                          lengths=lengths, lookup=lookup))
            elif field["kind"] == VECTORS:
                packed.append(PackedField(field["name"], FLOAT_VECTOR, values=arrays["values"]))
            elif field["kind"] == JSON_VALUES:
                continue  # metadata never enters a batch
            else:
                packed.append(PackedField(field["name"], INT_SCALAR, values=arrays["values"], lookup=lookup))
        return packed

    def _lookup(self, field: Dict[str, Any]) -> Optional[numpy.ndarray]:
        if field["kind"] not in (TOKENS, LABELS):
            return None
        if self._lookups is None:
            raise RuntimeError(f"Field {field['name']!r} holds type ids: index the dataset with a vocabulary first (indexed(vocab)).")
        return self._lookups[field["namespace"]]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Dict[str, Any]:  # type: ignore[override]
        """The indexed instance at `index` (field name → list of ids, id, float vector or metadata value)."""
        instance = self._stored(index)
        for field in self.fields:
            lookup = self._lookup(field)
            value = instance[field["name"]]
            if field["kind"] in (TOKENS, TOKEN_IDS):
                instance[field["name"]] = (lookup[value] if lookup is not None else value).tolist()
            elif field["kind"] in (LABELS, INTS):
                instance[field["name"]] = int(lookup[value]) if lookup is not None else value
        return instance

    def _stored(self, index: int) -> Dict[str, Any]:
        """The values stored for the instance at `index`: token and label type ids (not yet
        vocabulary ids), vectors and metadata values."""
        if isinstance(index, slice):
            raise TypeError("ColumnarDataset items are taken one at a time.")
        if not -self.size <= index < self.size:
            raise IndexError(f"index {index} out of range for {self.size} instances")
        index %= self.size
        instance: Dict[str, Any] = {}
        for field in self.fields:
            arrays = self._arrays[field["name"]]
            if field["kind"] in (TOKENS, TOKEN_IDS, JSON_VALUES):
                start = int(arrays["offsets"][index])
                end = int(arrays["offsets"][index + 1]) if index + 1 < self.size else field["tokens"]
                values = numpy.asarray(arrays["values"][start:end])
                instance[field["name"]] = orjson.loads(values.tobytes()) if field["kind"] == JSON_VALUES else values
            elif field["kind"] == VECTORS:
                instance[field["name"]] = numpy.array(arrays["values"][index])
            else:
                instance[field["name"]] = int(arrays["values"][index])
        return instance

    def instance(self, index: int) -> Instance:
        """The instance at `index` as fields, as a reader gives it (token and label strings,
        metadata values), for postprocessors; built on demand, never kept. Pretrained tokenizers'
        word pieces are not stored: their fields hold the ids, and the ids' digits as tokens."""
        stored = self._stored(index)
        fields: Dict[str, Field] = {}
        for field in self.fields:
            name, kind, value = field["name"], field["kind"], stored[field["name"]]
            if kind == TOKENS:
                types = self._types[field["namespace"]]
                fields[name] = TextField([types[i] for i in value.tolist()], namespace=field["namespace"])
            elif kind == TOKEN_IDS:
                fields[name] = TextField([str(i) for i in value.tolist()], token_ids=value.tolist())
            elif kind == LABELS:
                fields[name] = LabelField(self._types[field["namespace"]][value], namespace=field["namespace"])
            elif kind == VECTORS:
                fields[name] = TensorField(value)
            elif kind == JSON_VALUES:
                fields[name] = MetadataField(value)
            else:
                fields[name] = LabelField(value, skip_indexing=True)
        return Instance(fields)

    def instances(self) -> "Sequence[Instance]":
        """Every instance as fields (see `instance`), built as they are read."""
        return _Instances(self)

    def __repr__(self) -> str:
        return f"ColumnarDataset({self.size} instances, fields {[field['name'] for field in self.fields]}, at {self.directory})"


class _Instances(Sequence):
    """A columnar dataset's instances, each built when it is read."""

    def __init__(self, dataset: ColumnarDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Instance:  # type: ignore[override]
        return self.dataset.instance(index)
