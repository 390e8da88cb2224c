"""The `language_modeling` reader: plain text tokenized and packed into blocks of `block_size` ids."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.batch_transforms import MaskedLanguageModelling
from ipuflow.data.columnar.builder import TOKEN_IDS, FieldBatch
from ipuflow.data.fields import TextField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import RECORDS_PER_BATCH, DatasetReader
from ipuflow.data.readers.json_lines import read_json_lines, require_key
from ipuflow.data.readers.text_lines import utf8_lines
from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, Tokenizer

TEXTS_PER_CALL = 1000
"""Texts tokenized by one batched call of the tokenizer."""
PROMPT = "prompt"
"""The field of a text given to `predict`: ids to continue (causal) or to fill in (masked)."""


@DatasetReader.register("language_modeling")
class LanguageModelingReader(DatasetReader):
    """Reads text for causal or masked language modelling: every text of the file is tokenized
    whole (with the tokenizer's special tokens, which mark where texts meet), the ids of all texts
    are concatenated in file order and cut into blocks of `block_size` ids; the remainder shorter
    than a block is dropped (as transformers' run_clm and run_mlm `group_texts`). Each block is an
    instance with one field, `tokens`.

    The file is plain text, one text per non-blank line, or, with `text_key`, JSON lines whose
    `text_key` holds the text. `mlm_probability` (e.g. 0.15) makes it masked language modelling:
    the data loader masks every batch (`MaskedLanguageModelling`: that share of the tokens chosen,
    80% of them masked, 10% replaced by a random token, 10% kept) and adds `lm_labels`.

    `predict` takes `{"text": ...}` (or the `text_key`): its ids are the `prompt` to continue (the
    trailing separator left off) or, for masked LM, to fill in at its mask tokens.
    """

    def __init__(self, tokenizer: Tokenizer, block_size: int = 128, text_key: Optional[str] = None,
                 mlm_probability: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        validators.positive_int("block_size", block_size)
        if not isinstance(tokenizer, PretrainedTransformerTokenizer):
            raise ConfigurationError(f"the language_modeling reader needs a pretrained_transformer tokenizer, whose ids "
                                     f"the model's embeddings share; found {type(tokenizer).__name__}.", key="tokenizer")
        if mlm_probability is not None:
            if isinstance(mlm_probability, bool) or not isinstance(mlm_probability, (int, float)) \
                    or not 0.0 < mlm_probability < 1.0:
                raise ConfigurationError(key="mlm_probability", expected="a number between 0 and 1 (e.g. 0.15), or null "
                                         "for causal language modelling", found=mlm_probability)
            if tokenizer.mask_token_id is None:
                raise ConfigurationError(f"{tokenizer.model_name!r} has no mask token, which masked language modelling "
                                         "needs; use a tokenizer with one, or leave mlm_probability out (causal).",
                                         key="mlm_probability")
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.text_key = text_key
        self.mlm_probability = mlm_probability

    def batch_transform(self) -> Optional[MaskedLanguageModelling]:
        """With `mlm_probability`, the masking the data loader applies to every batch; else None."""
        if self.mlm_probability is None:
            return None
        return MaskedLanguageModelling(self.tokenizer.mask_token_id or 0, self.tokenizer.vocab_size,  # checked above
                                       self.tokenizer.special_ids, float(self.mlm_probability))

    def _texts(self, path: Path) -> Iterator[str]:
        if self.text_key is None:
            for line in utf8_lines(path):
                if line.strip():
                    yield line.strip()
            return
        for line_number, record in read_json_lines(path):
            text = require_key(record, self.text_key, f"{path}:{line_number}")
            if not isinstance(text, str):
                raise ConfigurationError(f"{path}:{line_number}: {self.text_key!r} must be a string, found {text!r:.60}.")
            yield text

    def blocks(self, path: Path) -> Iterator[List[int]]:
        """The blocks of `block_size` ids of the file at `path`, in order."""
        pending: List[int] = []
        texts = self._texts(path)
        yielded = False
        while True:
            chunk = list(itertools.islice(texts, TEXTS_PER_CALL))
            if not chunk:
                break
            for ids in self.tokenizer.whole_texts(chunk):
                pending.extend(ids)
            whole = len(pending) - len(pending) % self.block_size
            for start in range(0, whole, self.block_size):
                yielded = True
                yield pending[start:start + self.block_size]
            del pending[:whole]
        if not yielded:
            raise ConfigurationError(f"{path}: its texts give {len(pending)} tokens in all, fewer than one block of "
                                     f"block_size {self.block_size}; give more text or a smaller block_size.")

    def _read(self, path: Path) -> Iterator[Instance]:
        for block in self.blocks(path):
            yield Instance({"tokens": TextField(self.tokenizer.convert_ids_to_tokens(block), token_ids=block)})

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """The blocks as batches of token ids (there is no metadata)."""
        blocks = self.blocks(path)
        while True:
            chunk = list(itertools.islice(blocks, RECORDS_PER_BATCH))
            if not chunk:
                return
            yield {"tokens": FieldBatch(TOKEN_IDS, chunk)}

    def text_to_instance(self, text: str) -> Instance:  # type: ignore[override]
        """The `prompt` instance of a text (for `predict`)."""
        ids = self.tokenizer.whole_texts([text])[0][: self.block_size]
        if self.mlm_probability is None:
            while len(ids) > 1 and ids[-1] in self.tokenizer.special_ids:
                ids = ids[:-1]  # continue the text, not after its separator
        return Instance({PROMPT: TextField(self.tokenizer.convert_ids_to_tokens(ids), token_ids=ids)})

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """The `prompt` instance of `{"text": ...}` (or the `text_key`)."""
        key = self.text_key or "text"
        text = require_key(dict(obj), key, "JSON input")
        if not isinstance(text, str):
            raise ConfigurationError(f"JSON input: {key!r} must be a string, found {text!r:.60}.")
        return self.text_to_instance(text)
