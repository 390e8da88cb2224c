"""Building a columnar dataset on disk from batches of tokenized records, one pass, bounded memory.

Token strings are interned into *type ids* per vocabulary namespace as they arrive, and each
namespace's type counts are kept alongside: the vocabulary is built from those counts alone and the
type ids are mapped to vocabulary ids when batches are gathered, so the data is tokenized once and
no Python object per instance is ever held.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

import numpy
import orjson

from ipuflow.config import ConfigurationError

FORMAT_VERSION = 1
"""Bumped whenever the files a builder writes change meaning; part of every cache key."""

META_FILE = "meta.json"

TOKENS = "tokens"  # lists of token strings, interned in a namespace
TOKEN_IDS = "token ids"  # lists of ids a pretrained tokenizer gave (no vocabulary)
LABELS = "labels"  # one string per record, interned in a namespace
INTS = "ints"  # one int per record, its own id
VECTORS = "vectors"  # one fixed-shape float vector per record
JSON_VALUES = "json values"  # one JSON value per record (metadata: never batched, kept for postprocessors)

FIELD_KINDS = (TOKENS, TOKEN_IDS, LABELS, INTS, VECTORS, JSON_VALUES)


@dataclass
class FieldBatch:
    """One field's values for a batch of records: `kind` says what `values` holds; `namespace` is
    the vocabulary namespace of `TOKENS` and `LABELS`."""

    kind: str
    values: Any  # TOKENS: lists of strings, InternedTokens or SeparatedTokens
    namespace: Optional[str] = None

    def __len__(self) -> int:
        return len(self.values)

    def head(self, count: int) -> "FieldBatch":
        """The first `count` records' values."""
        return FieldBatch(self.kind, self.values[:count], self.namespace)


class _Ids(Dict[str, int]):
    """String → id, where a string not seen before gets the next id (0, 1, ...) when looked up: so
    `map(ids.__getitem__, strings)` interns in one pass in C, calling Python only for new strings,
    and ids follow the order in which strings first occur."""

    __slots__ = ("next_id",)

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0

    def __missing__(self, string: str) -> int:
        self[string] = self.next_id
        self.next_id += 1
        return self.next_id - 1

    def ids_of(self, strings: Sequence[str], separator: Optional[str] = None) -> numpy.ndarray:
        """The ids of `strings` (interning new ones), with -1 for `separator`, which gets no id."""
        if separator is None:
            return numpy.fromiter(map(self.__getitem__, strings), dtype=numpy.int32, count=len(strings))
        own_id = dict.get(self, separator)  # a batch tokenized otherwise may have made it a type
        self[separator] = -1
        try:
            return numpy.fromiter(map(self.__getitem__, strings), dtype=numpy.int32, count=len(strings))
        finally:
            if own_id is None:
                del self[separator]
            else:
                self[separator] = own_id


@dataclass
class InternedTokens:
    """A batch's token lists, interned within the batch: `types` (its distinct strings, in the order they first occur),
    `ids` (every token's index into `types`, the lists back to back) and `lengths` (tokens per
    list). Small to send between processes, and mapped to a namespace's type ids with one gather."""

    types: List[str]
    ids: numpy.ndarray
    lengths: numpy.ndarray

    @classmethod
    def from_lists(cls, token_lists: Sequence[Sequence[str]]) -> "InternedTokens":
        """Intern `token_lists` (`map` runs in C, not a Python loop per token)."""
        lengths = numpy.fromiter(map(len, token_lists), dtype=numpy.int64, count=len(token_lists))
        local = _Ids()
        ids = local.ids_of(list(itertools.chain.from_iterable(token_lists)))
        return cls(list(local), ids, lengths)

    @classmethod
    def from_labels(cls, labels: Sequence[Any]) -> "InternedTokens":
        """Intern one label per record (as strings: the vocabulary holds labels as strings)."""
        local = _Ids()
        ids = local.ids_of(list(map(str, labels)))
        return cls(list(local), ids, numpy.ones(len(ids), dtype=numpy.int64))

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, records: slice) -> "InternedTokens":
        if records.start not in (None, 0) or records.step not in (None, 1):
            raise IndexError("InternedTokens are cut from the front only.")
        lengths = self.lengths[records]
        return InternedTokens(self.types, self.ids[: int(lengths.sum())], lengths)


@dataclass
class SeparatedTokens:
    """A batch's tokens as one flat list, with the token `separator` between one record's tokens and
    the next's, each record to be cut to `max_tokens`: what a tokenizer that matches a whole batch
    at once gives, interned straight into a namespace's table without a Python list per record."""

    flat: List[str]
    separator: str
    records: int
    max_tokens: Optional[int] = None

    def __len__(self) -> int:
        return self.records

    def interned(self) -> InternedTokens:
        """These tokens interned within the batch (what worker processes send back)."""
        local = _Ids()
        kept, lengths = self.split(local.ids_of(self.flat, self.separator))
        return InternedTokens(list(local), kept, lengths)

    def split(self, ids: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The ids of the flat tokens (-1 for the separators) without the separators and those past
        `max_tokens` of a record, and each record's length."""
        boundary = ids < 0
        ends = numpy.flatnonzero(boundary)
        if len(ends) != self.records - 1:
            raise ValueError(f"SeparatedTokens: {len(ends) + 1} token lists for {self.records} records.")
        starts = numpy.concatenate([[0], ends + 1])
        lengths = numpy.concatenate([ends, [len(ids)]]) - starts
        keep = ~boundary
        if self.max_tokens is not None and int(lengths.max(initial=0)) > self.max_tokens:
            position = numpy.arange(len(ids)) - starts[numpy.cumsum(boundary)]
            keep &= position < self.max_tokens
            lengths = numpy.minimum(lengths, self.max_tokens)
        return ids[keep], lengths.astype(numpy.int64)

    def __getitem__(self, records: slice) -> InternedTokens:
        return self.interned()[records]


class _TypeTable:
    """The distinct strings of one namespace (in the order they first occurred) and how often each occurred."""

    def __init__(self) -> None:
        self.ids = _Ids()
        self.counts = numpy.zeros(0, dtype=numpy.int64)

    def add(self, tokens: InternedTokens) -> numpy.ndarray:
        """The namespace's type ids of `tokens` (new strings get the next ids), counted."""
        mapping = self.ids.ids_of(tokens.types)  # in first-occurrence order, so new strings get ids as `add_separated` gives them
        typed = mapping[tokens.ids] if len(tokens.ids) else numpy.zeros(0, dtype=numpy.int32)
        self._count(typed)
        return typed

    def add_separated(self, tokens: SeparatedTokens) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The namespace's type ids of `tokens` and each record's length, counted."""
        typed, lengths = tokens.split(self.ids.ids_of(tokens.flat, tokens.separator))
        self._count(typed)
        return typed, lengths

    def _count(self, typed: numpy.ndarray) -> None:
        ids = self.ids
        counts = numpy.bincount(typed, minlength=len(ids)) if len(typed) else numpy.zeros(len(ids), dtype=numpy.int64)
        if len(counts) > len(self.counts):
            self.counts = numpy.concatenate([self.counts, numpy.zeros(len(counts) - len(self.counts), dtype=numpy.int64)])
        self.counts[: len(counts)] += counts


class _ColumnWriter:
    """Appends one field's arrays to files in the dataset directory."""

    def __init__(self, directory: Path, position: int, name: str, batch: FieldBatch) -> None:
        self.name = name
        self.kind = batch.kind
        self.namespace = batch.namespace
        self.prefix = f"field{position}"
        self.sequence = batch.kind in (TOKENS, TOKEN_IDS, JSON_VALUES)
        self.shape: Optional[List[int]] = None
        self.rows = 0
        self.total = 0  # sequences: tokens written so far
        self.longest = 0
        self._values: BinaryIO = open(directory / f"{self.prefix}.values", "wb")
        self._offsets: Optional[BinaryIO] = open(directory / f"{self.prefix}.offsets", "wb") if self.sequence else None

    def write(self, batch: FieldBatch, types: Dict[str, _TypeTable]) -> None:
        if batch.kind != self.kind or batch.namespace != self.namespace:
            raise ConfigurationError(
                f"Field {self.name!r} changed from {self.kind} ({self.namespace}) to {batch.kind} ({batch.namespace}) "
                "between records; every record needs the same fields."
            )
        if self.kind == TOKENS:
            table = types.setdefault(self.namespace or "", _TypeTable())
            if isinstance(batch.values, SeparatedTokens):
                values, lengths = table.add_separated(batch.values)
            else:
                interned = batch.values if isinstance(batch.values, InternedTokens) else InternedTokens.from_lists(batch.values)
                lengths = interned.lengths
                values = table.add(interned)
        elif self.kind == TOKEN_IDS:
            lengths = numpy.fromiter(map(len, batch.values), dtype=numpy.int64, count=len(batch))
            values = numpy.fromiter(itertools.chain.from_iterable(batch.values), dtype=numpy.int32, count=int(lengths.sum()))
        elif self.kind == JSON_VALUES:
            try:
                encoded = list(map(orjson.dumps, batch.values))
            except TypeError as error:
                raise ConfigurationError(f"Field {self.name!r} holds a value that is not JSON ({error}).") from None
            lengths = numpy.fromiter(map(len, encoded), dtype=numpy.int64, count=len(encoded))
            values = numpy.frombuffer(b"".join(encoded), dtype=numpy.uint8)
        if self.sequence:
            ends = numpy.cumsum(lengths) + self.total
            offsets = ends - lengths
            self.total = int(ends[-1]) if len(ends) else self.total
            self.longest = max(self.longest, int(lengths.max()) if len(lengths) else 0)
            self._offsets.write(offsets.astype(numpy.int64).tobytes())  # type: ignore[union-attr]
        elif self.kind == LABELS:
            labels = InternedTokens.from_labels(batch.values)
            values = types.setdefault(self.namespace or "", _TypeTable()).add(labels)
        elif self.kind == INTS:
            values = numpy.asarray(batch.values, dtype=numpy.int64)
        else:
            values = numpy.asarray(batch.values, dtype=numpy.float32)
            shape = list(values.shape[1:])
            if self.shape is None:
                self.shape = shape
            elif shape != self.shape:
                raise ConfigurationError(f"Field {self.name!r} holds vectors of shape {self.shape} and {shape}; they must agree.")
        self._values.write(numpy.ascontiguousarray(values).tobytes())
        self.rows += len(batch)

    def close(self) -> Dict[str, Any]:
        self._values.close()
        if self._offsets is not None:
            self._offsets.close()
        return {
            "name": self.name,
            "kind": self.kind,
            "namespace": self.namespace,
            "prefix": self.prefix,
            "dtype": {TOKENS: "int32", TOKEN_IDS: "int32", LABELS: "int32", INTS: "int64", VECTORS: "float32", JSON_VALUES: "uint8"}[self.kind],
            "shape": self.shape,
            "tokens": self.total,
            "longest": self.longest,
        }


class ColumnarBuilder:
    """Writes a columnar dataset into `directory` from batches of fields (`add`), then `finish`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.size = 0
        self._writers: Dict[str, _ColumnWriter] = {}
        self._types: Dict[str, _TypeTable] = {}

    def add(self, batch: Dict[str, FieldBatch]) -> None:
        """Append a batch of records: field name → that field's values for every record."""
        sizes = {len(values) for values in batch.values()}
        if len(sizes) > 1:
            raise ValueError(f"ColumnarBuilder.add: fields of one batch hold different numbers of records ({sorted(sizes)}).")
        if not sizes or sizes == {0}:
            return
        if not self._writers:
            for position, (name, values) in enumerate(batch.items()):
                if values.kind not in FIELD_KINDS:
                    raise ValueError(f"ColumnarBuilder.add: unknown field kind {values.kind!r} for {name!r}.")
                self._writers[name] = _ColumnWriter(self.directory, position, name, values)
        elif set(batch) != set(self._writers):
            raise ConfigurationError(
                f"Records have fields {sorted(batch)}, but earlier records have {sorted(self._writers)}; every "
                "record needs the same fields."
            )
        for name, values in batch.items():
            self._writers[name].write(values, self._types)
        self.size += sizes.pop()

    def finish(self) -> None:
        """Write the type tables and the description (written last: its presence marks a complete dataset)."""
        fields = [writer.close() for writer in self._writers.values()]
        namespaces = {}
        for position, (namespace, table) in enumerate(sorted(self._types.items())):
            stem = f"types{position}"
            with open(self.directory / f"{stem}.json", "w", encoding="utf-8") as file:
                json.dump(list(table.ids), file, ensure_ascii=False)
            table.counts.astype(numpy.int64).tofile(self.directory / f"{stem}.counts")
            namespaces[namespace] = stem
        meta = {"format": FORMAT_VERSION, "size": self.size, "fields": fields, "namespaces": namespaces}
        with open(self.directory / META_FILE, "w", encoding="utf-8") as file:
            json.dump(meta, file, indent=1)
