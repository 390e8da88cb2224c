"""The `text_classification_json` reader: JSON lines of a text and, optionally, its label."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Union

from ipuflow.config import ConfigurationError
from ipuflow.data.fields import Field, LabelField, MetadataField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.labels import LabelPresence, check_label
from ipuflow.data.readers.json_lines import read_json_lines, require_key
from ipuflow.data.tokenizers import Tokenizer, WhitespaceTokenizer

logger = logging.getLogger(__name__)


def text_classification_instance(
    tokenizer: Tokenizer,
    text: str,
    label: Union[str, int, None],
    max_tokens: Optional[int],
    label_namespace: str,
    keep_text: bool,
) -> Instance:
    """An instance with fields `tokens`, `label` (if given) and `text` (metadata, if `keep_text`)."""
    fields: Dict[str, Field] = {"tokens": tokenizer.text_field(text, max_tokens)}
    if label is not None:
        fields["label"] = LabelField(label, namespace=label_namespace)
    if keep_text:
        fields["text"] = MetadataField(text)
    return Instance(fields)


@DatasetReader.register("text_classification_json")
class TextClassificationJsonReader(DatasetReader):
    """JSON lines such as `{"text": "A fine film.", "label": "fresh"}`.

    `text_key` and `label_key` name the keys; a file labels every record or none (unlabelled files
    are for prediction). Texts are cut to `max_tokens` tokens; `keep_text` keeps the raw text as
    metadata for predictions; with `id_key`, each record's id is kept as the metadata field `id`.
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
    ) -> None:
        super().__init__(max_instances=max_instances)
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"dataset_reader.max_tokens: expected a positive int or null, found {max_tokens}.")
        self.tokenizer = tokenizer
        self.text_key = text_key
        self.label_key = label_key
        self.max_tokens = max_tokens
        self.label_namespace = label_namespace
        self.keep_text = keep_text
        self.id_key = id_key

    def _read(self, path: Path) -> Iterator[Instance]:
        labels = LabelPresence(path, self.label_key)
        for line_number, record in read_json_lines(path):
            labels.check(self.label_key in record, line_number)
            yield self._from_record(record, f"{path}:{line_number}")
        if labels.first is False:
            logger.warning("%s has no %r key in any record: its instances have no labels.", path, self.label_key)

    def _from_record(self, record: Mapping[str, Any], where: str) -> Instance:
        text = require_key(dict(record), self.text_key, where)
        if not isinstance(text, str):
            raise ConfigurationError(f"{where}: the text {self.text_key!r} must be a string, found {text!r}.")
        label = check_label(record[self.label_key], where, self.label_key) if self.label_key in record else None
        instance = self.text_to_instance(text, label)
        if self.id_key is not None:
            # Kept as metadata so that a postprocessor (e.g. grouped_vote) can regroup windows of one document.
            instance.add_field("id", MetadataField(require_key(dict(record), self.id_key, where)))
        return instance

    def text_to_instance(self, text: str, label: Union[str, int, None] = None) -> Instance:  # type: ignore[override]
        """An instance of `text` and, if given, its `label`."""
        return text_classification_instance(self.tokenizer, text, label, self.max_tokens, self.label_namespace, self.keep_text)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{text_key: ..., label_key: ...}` (the label optional)."""
        return self._from_record(obj, "JSON input")
