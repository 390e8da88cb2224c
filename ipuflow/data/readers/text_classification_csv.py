"""The `text_classification_csv` reader: delimited text with a header row."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.labels import check_label
from ipuflow.data.readers.text_lines import utf8_lines
from ipuflow.data.columnar import FieldBatch
from ipuflow.data.readers.text_classification_json import text_classification_batches, text_classification_instance
from ipuflow.data.tokenizers import Tokenizer, WhitespaceTokenizer

logger = logging.getLogger(__name__)


@DatasetReader.register("text_classification_csv")
class TextClassificationCsvReader(DatasetReader):
    """CSV (or other `delimiter`) files whose header row names a `text_column` and a
    `label_column`. A file without the label column gives unlabelled instances (for prediction).
    """

    def __init__(
        self,
        tokenizer: Tokenizer = WhitespaceTokenizer(),
        text_column: str = "text",
        label_column: str = "label",
        delimiter: str = ",",
        max_instances: Optional[int] = None,
        max_tokens: Optional[int] = None,
        label_namespace: str = "labels",
        keep_text: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_instances=max_instances, **kwargs)
        if len(delimiter) != 1:
            raise ConfigurationError(key="delimiter", expected="one character", found=delimiter)
        validators.positive_int("max_tokens", max_tokens, optional=True)
        self.tokenizer = tokenizer
        self.text_column = text_column
        self.label_column = label_column
        self.delimiter = delimiter
        self.max_tokens = max_tokens
        self.label_namespace = label_namespace
        self.keep_text = keep_text

    def _read(self, path: Path) -> Iterator[Instance]:
        for text, label in self._rows(path):
            yield self.text_to_instance(text, label)

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """Batches of rows, each text column tokenized with one batched tokenizer call (metadata
        only if `metadata`)."""
        records = ((text, None, label) for text, label in self._rows(path))
        yield from text_classification_batches(self.tokenizer, records, self.max_tokens, self.label_namespace,
                                               keep_text=metadata and self.keep_text)

    def _rows(self, path: Path) -> Iterator[Tuple[str, Optional[str]]]:
        """(text, label or None) for each row of the file at `path`."""
        # Lines keep their endings, so the csv module handles line breaks inside quoted fields.
        lines = utf8_lines(path)
        try:
            rows = csv.reader(lines, delimiter=self.delimiter)
            try:
                header = next(rows, None)
                if header is None:
                    return
                if self.text_column not in header:
                    raise ConfigurationError(
                        f"{path}:1: the header has no text column {self.text_column!r} (columns: {header})."
                    )
                text_at = header.index(self.text_column)
                label_at = header.index(self.label_column) if self.label_column in header else None
                if label_at is None:
                    logger.warning("%s has no %r column: its instances have no labels.", path, self.label_column)
                width = len(header)
                for row in rows:
                    if len(row) != width:
                        if not row:
                            continue
                        raise ConfigurationError(
                            f"{path}:{rows.line_num}: expected {width} fields as in the header, found {len(row)}."
                        )
                    yield row[text_at], (None if label_at is None else row[label_at])
            except csv.Error as error:
                raise ConfigurationError(f"{path}:{rows.line_num}: malformed CSV ({error}).") from None
        finally:
            lines.close()

    def text_to_instance(self, text: str, label: Union[str, int, None] = None) -> Instance:  # type: ignore[override]
        """An instance of `text` and, if given, its `label`."""
        return text_classification_instance(self.tokenizer, text, label, self.max_tokens, self.label_namespace, self.keep_text)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{text_column: ..., label_column: ...}` (the label optional)."""
        text = obj.get(self.text_column)
        if not isinstance(text, str):
            raise ConfigurationError(f"JSON input: expected a string under {self.text_column!r}, found {text!r} (keys: {sorted(obj)}).")
        label = check_label(obj[self.label_column], "JSON input", self.label_column) if self.label_column in obj else None
        return self.text_to_instance(text, label)
