"""The `sentiment_lines` reader: JSON lines `{"text": ..., "label": ...}`, lower-cased words."""

import json
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ipuflow.config import ConfigurationError
from ipuflow.data.fields import LabelField, TextField
from ipuflow.data.instance import Instance
from ipuflow.data.readers import DatasetReader

WORD = re.compile(r"[a-z0-9']+")


@DatasetReader.register("sentiment_lines")
class SentimentLinesReader(DatasetReader):
    """Each line a JSON object; `tokens` are its text's lower-cased words (at most `max_tokens`),
    `label` its label when the line has one."""

    def __init__(self, max_tokens: int = 48, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # max_instances, cache_directory, cache, num_workers
        if max_tokens < 1:
            raise ConfigurationError(f"dataset_reader.max_tokens: expected a positive int, found {max_tokens}.")
        self.max_tokens = max_tokens

    def _read(self, path: Path) -> Iterator[Instance]:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record.get("text"), str):
                        raise ConfigurationError(f"{path}:{number}: expected a string under 'text'.")
                    yield self.text_to_instance(record["text"], record.get("label"))

    def text_to_instance(self, text: str, label: Optional[str] = None) -> Instance:  # type: ignore[override]
        """An instance of `text` and, if given, its `label`."""
        fields = {"tokens": TextField(WORD.findall(text.lower())[: self.max_tokens])}
        if label is not None:
            fields["label"] = LabelField(label)
        return Instance(fields)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """What `ipuflow predict` reads: `{"text": ...}` (a label is optional)."""
        return self.text_to_instance(obj["text"], obj.get("label"))
