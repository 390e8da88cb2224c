"""The `text_classification_json` reader: JSON lines of a text and, optionally, its label."""

from __future__ import annotations

import functools
import itertools
import logging
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.columnar import FieldBatch
from ipuflow.data.columnar.builder import JSON_VALUES, LABELS, TOKENS, InternedTokens, SeparatedTokens
from ipuflow.data.columnar.workers import map_in_workers
from ipuflow.data.fields import Field, LabelField, MetadataField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import RECORDS_PER_BATCH, DatasetReader
from ipuflow.data.readers.labels import LabelPresence, check_label
from ipuflow.data.readers.json_lines import json_line_chunks, parse_json_chunk, read_json_lines, require_key
from ipuflow.data.tokenizers import Tokenizer, WhitespaceTokenizer

logger = logging.getLogger(__name__)


TEXT_PAIR_FIELD = "tokens_pair"
"""The field of a record's second text (hypothesis, context, ...), beside `tokens`."""

TextRecord = Tuple[str, Optional[str], Union[str, int, None]]
"""A record's text, its second text (or None) and its label (or None)."""


def text_classification_instance(
    tokenizer: Tokenizer,
    text: str,
    label: Union[str, int, None],
    max_tokens: Optional[int],
    label_namespace: str,
    keep_text: bool,
    text_pair: Optional[str] = None,
) -> Instance:
    """An instance with fields `tokens`, `tokens_pair` (if a second text is given), `label` (if
    given) and `text` (metadata, if `keep_text`)."""
    fields: Dict[str, Field] = {"tokens": tokenizer.text_field(text, max_tokens)}
    if text_pair is not None:
        fields[TEXT_PAIR_FIELD] = tokenizer.text_field(text_pair, max_tokens)
    if label is not None:
        fields["label"] = LabelField(label, namespace=label_namespace)
    if keep_text:
        fields["text"] = MetadataField(text)
    return Instance(fields)


def interned(batch: FieldBatch) -> FieldBatch:
    """`batch` with token strings interned (so that a worker process does it and sends back little)."""
    if batch.kind != TOKENS or isinstance(batch.values, InternedTokens):
        return batch
    if isinstance(batch.values, SeparatedTokens):
        return FieldBatch(TOKENS, batch.values.interned(), batch.namespace)
    return FieldBatch(TOKENS, InternedTokens.from_lists(batch.values), batch.namespace)


def text_classification_batches(
    tokenizer: Tokenizer, records: Iterator[TextRecord], max_tokens: Optional[int], label_namespace: str,
    keep_text: bool = False,
) -> Iterator[Dict[str, FieldBatch]]:
    """The fields `text_classification_instance` makes, for batches of records at once (one batched
    tokenizer call per batch and field); the metadata field `text` only if `keep_text`."""
    while True:
        chunk = list(itertools.islice(records, RECORDS_PER_BATCH))
        if not chunk:
            return
        texts, pairs, labels = zip(*chunk)
        batch = {"tokens": tokenizer.batch_field(texts, max_tokens)}
        if pairs[0] is not None:
            batch[TEXT_PAIR_FIELD] = tokenizer.batch_field(pairs, max_tokens)  # type: ignore[arg-type]
        if labels[0] is not None:
            if None in labels:
                raise ConfigurationError("Some records have a label and some have none: label either every record or none.")
            batch["label"] = FieldBatch(LABELS, labels, label_namespace)
        if keep_text:
            batch["text"] = FieldBatch(JSON_VALUES, texts)
        yield batch


@DatasetReader.register("text_classification_json")
class TextClassificationJsonReader(DatasetReader):
    """JSON lines such as `{"text": "A fine film.", "label": "fresh"}`.

    `text_key` and `label_key` name the keys; a file labels every record or none (unlabelled files
    are for prediction). Texts are cut to `max_tokens` tokens; `keep_text` keeps the raw text as
    metadata for predictions; with `id_key`, each record's id is kept as the metadata field `id`.
    With `text_pair_key`, each record has a second text (premise/hypothesis, question/context),
    tokenized into the field `tokens_pair`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer = WhitespaceTokenizer(),
        text_key: str = "text",
        label_key: str = "label",
        max_instances: Optional[int] = None,
        max_tokens: Optional[int] = None,
        label_namespace: str = "labels",
        keep_text: bool = True,
        id_key: Optional[str] = None,
        text_pair_key: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_instances=max_instances, **kwargs)
        validators.positive_int("max_tokens", max_tokens, optional=True)
        self.tokenizer = tokenizer
        self.text_key = text_key
        self.label_key = label_key
        self.max_tokens = max_tokens
        self.label_namespace = label_namespace
        self.keep_text = keep_text
        self.id_key = id_key
        self.text_pair_key = text_pair_key

    def _read(self, path: Path) -> Iterator[Instance]:
        labels = LabelPresence(path, self.label_key)
        for line_number, record in read_json_lines(path):
            labels.check(self.label_key in record, line_number)
            yield self._from_record(record, f"{path}:{line_number}")
        if labels.first is False:
            logger.warning("%s has no %r key in any record: its instances have no labels.", path, self.label_key)

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """Chunks of lines, each parsed with one JSON call and tokenized with one batched tokenizer
        call, in `num_workers` processes (metadata only if `metadata`)."""
        labelled: Optional[bool] = None
        chunks = json_line_chunks(path, RECORDS_PER_BATCH)
        work = functools.partial(self._chunk_fields_interned if self._num_workers else self._chunk_fields, metadata=metadata)
        for batch in map_in_workers(work, chunks, self._num_workers):
            if batch is not None and batch and labelled is None:
                labelled = "label" in batch
            if batch is None or (batch and ("label" in batch) != labelled):
                # Record by record, for the error that names the line (instances check the id too).
                for _ in self._read(path) if metadata else self._text_records(path):
                    pass
                raise ConfigurationError(f"{path}: records with a wrong text or label.")  # what the records said
            if batch:
                yield batch
        if labelled is False:
            logger.warning("%s has no %r key in any record: its instances have no labels.", path, self.label_key)

    def _chunk_fields(self, chunk: Tuple[int, List[bytes]], metadata: bool = False) -> Optional[Dict[str, FieldBatch]]:
        """The fields of a chunk of lines ({} if all are blank), or None if a record is wrong."""
        records = parse_json_chunk(chunk[1])
        if records is None:
            return None
        if not records:
            return {}
        # Checked a column at a time with `map` and sets: no Python loop per record.
        texts = list(map(dict.get, records, itertools.repeat(self.text_key)))
        pairs = list(map(dict.get, records, itertools.repeat(self.text_pair_key))) if self.text_pair_key is not None else None
        labelled = sum(map(dict.__contains__, records, itertools.repeat(self.label_key)))
        labels = list(map(dict.get, records, itertools.repeat(self.label_key))) if labelled else None
        if not (
            set(map(type, texts)) == {str}
            and (pairs is None or set(map(type, pairs)) == {str})
            and labelled in (0, len(records))
            and (labels is None or set(map(type, labels)) <= {str, int})
        ):
            return None
        # Every text and pair was checked to be a str just above.
        batch = {"tokens": self.tokenizer.batch_field(texts, self.max_tokens)}  # type: ignore[arg-type]
        if pairs is not None:
            batch[TEXT_PAIR_FIELD] = self.tokenizer.batch_field(pairs, self.max_tokens)  # type: ignore[arg-type]
        if labels is not None:
            batch["label"] = FieldBatch(LABELS, labels, self.label_namespace)
        if metadata and self.keep_text:
            batch["text"] = FieldBatch(JSON_VALUES, texts)
        if metadata and self.id_key is not None:
            if sum(map(dict.__contains__, records, itertools.repeat(self.id_key))) != len(records):
                return None
            batch["id"] = FieldBatch(JSON_VALUES, list(map(dict.get, records, itertools.repeat(self.id_key))))
        return batch

    def _chunk_fields_interned(self, chunk: Tuple[int, List[bytes]], metadata: bool = False) -> Optional[Dict[str, FieldBatch]]:
        """`_chunk_fields` with tokens interned, so that a worker process sends back little."""
        batch = self._chunk_fields(chunk, metadata)
        return batch and {name: interned(values) for name, values in batch.items()}

    def _text_records(self, path: Path) -> Iterator[TextRecord]:
        labels = LabelPresence(path, self.label_key)
        for line_number, record in read_json_lines(path):
            labels.check(self.label_key in record, line_number)
            yield self._texts_and_label(record, path, line_number)
        if labels.first is False:
            logger.warning("%s has no %r key in any record: its instances have no labels.", path, self.label_key)

    def _texts_and_label(self, record: Mapping[str, Any], path: Any, line_number: int = 0) -> TextRecord:
        # Cheap checks first: the error location is formatted only when a record is wrong.
        text = record.get(self.text_key)
        pair = record.get(self.text_pair_key) if self.text_pair_key is not None else None
        has_label = self.label_key in record
        label = record[self.label_key] if has_label else None
        if type(text) is str and (self.text_pair_key is None or type(pair) is str) and (not has_label or type(label) in (str, int)):
            return text, pair, label  # type: ignore[return-value]  # the types were checked in the condition
        where = f"{path}:{line_number}" if line_number else str(path)
        for key in (self.text_key, self.text_pair_key):
            if key is not None:
                value = require_key(dict(record), key, where)
                if not isinstance(value, str):
                    raise ConfigurationError(f"{where}: the text {key!r} must be a string, found {value!r}.")
        label = check_label(record[self.label_key], where, self.label_key) if self.label_key in record else None
        return text, pair, label  # type: ignore[return-value]  # the texts were checked to be str above

    def _from_record(self, record: Mapping[str, Any], where: str) -> Instance:
        text, pair, label = self._texts_and_label(record, where)
        instance = self.text_to_instance(text, label, pair)
        if self.id_key is not None:
            # Kept as metadata so that a postprocessor (e.g. grouped_vote) can regroup windows of one document.
            instance.add_field("id", MetadataField(require_key(dict(record), self.id_key, where)))
        return instance

    def text_to_instance(self, text: str, label: Union[str, int, None] = None, text_pair: Optional[str] = None) -> Instance:  # type: ignore[override]
        """An instance of `text` and, if given, its `label` and second text."""
        return text_classification_instance(self.tokenizer, text, label, self.max_tokens, self.label_namespace,
                                            self.keep_text, text_pair)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{text_key: ..., label_key: ...}` (the label optional)."""
        return self._from_record(obj, "JSON input")
