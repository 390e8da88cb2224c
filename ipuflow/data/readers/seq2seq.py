"""The `seq2seq` reader: JSON lines of a source text and a target text (summaries, headlines, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.fields import MetadataField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.json_lines import read_json_lines, require_key
from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, Tokenizer


@DatasetReader.register("seq2seq")
class Seq2SeqReader(DatasetReader):
    """Reads JSON lines holding a source text (`source_key`) and, for training and scoring, a target
    text (`target_key`), for sequence-to-sequence models.

    Fields: `tokens` (the source, cut to `source_max_length` tokens), `target_tokens` (the target,
    cut to `target_max_length`; padding positions are left out of the loss by the model), and the
    texts as metadata (`source`, `target`) for the `generation_scores` postprocessor. Both texts go
    through `tokenizer` unless `target_tokenizer` is given (an encoder-decoder pair of different
    vocabularies). A line without the source, or a target that is not a string, is an error naming
    the file and line.
    """

    def __init__(self, tokenizer: Tokenizer, target_tokenizer: Optional[Tokenizer] = None, source_key: str = "source",
                 target_key: str = "target", source_max_length: Optional[int] = None,
                 target_max_length: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        validators.positive_int("source_max_length", source_max_length, optional=True)
        validators.positive_int("target_max_length", target_max_length, optional=True)
        for key, given in (("tokenizer", tokenizer), ("target_tokenizer", target_tokenizer)):
            if given is not None and not isinstance(given, PretrainedTransformerTokenizer):
                raise ConfigurationError(f"the seq2seq reader needs a pretrained_transformer tokenizer, whose ids the "
                                         f"model's embeddings and generation share; found {type(given).__name__}.", key=key)
        self.tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer
        self.source_key = source_key
        self.target_key = target_key
        self.source_max_length = source_max_length
        self.target_max_length = target_max_length

    def _read(self, path: Path) -> Iterator[Instance]:
        for line_number, record in read_json_lines(path):
            yield self._instance(record, f"{path}:{line_number}")

    def _instance(self, record: Mapping[str, Any], where: str) -> Instance:
        source = require_key(dict(record), self.source_key, where)
        if not isinstance(source, str):
            raise ConfigurationError(f"{where}: {self.source_key!r} must be a string, found {source!r}.")
        target = record.get(self.target_key)
        if target is not None and not isinstance(target, str):
            raise ConfigurationError(f"{where}: {self.target_key!r} must be a string, found {target!r}.")
        return self.text_to_instance(source, target)

    def text_to_instance(self, source: str, target: Optional[str] = None) -> Instance:  # type: ignore[override]
        """The instance of a source text (and its target, when known)."""
        fields = {"tokens": self.tokenizer.text_field(source, self.source_max_length), "source": MetadataField(source)}
        if target is not None:
            target_tokenizer = self.target_tokenizer or self.tokenizer
            fields["target_tokens"] = target_tokenizer.text_field(target, self.target_max_length, namespace="target_tokens")
            fields["target"] = MetadataField(target)
        return Instance(fields)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """The instance of `{"source": ..., "target": optional}` (the configured keys)."""
        return self._instance(obj, "JSON input")
