"""The Tokenizer base class: text in, tokens (and, for pretrained tokenizers, their ids) out."""

from __future__ import annotations

from typing import List, Optional, Sequence

from ipuflow.config import Registrable
from ipuflow.data.columnar.builder import TOKENS, FieldBatch
from ipuflow.data.fields import TextField


class Tokenizer(Registrable):
    """Splits text into tokens. Built-ins: `whitespace` (the default), `regex`,
    `pretrained_transformer`."""

    default_implementation = "whitespace"

    def tokenize(self, text: str) -> List[str]:
        """The tokens of `text`."""
        raise NotImplementedError

    def text_field(self, text: str, max_tokens: Optional[int] = None, namespace: str = "tokens") -> TextField:
        """A `TextField` of `text`'s tokens, at most `max_tokens` of them.

        Tokenizers whose tokens a vocabulary indexes give a field of token strings; pretrained
        tokenizers give ids as well, and keep their special tokens when they truncate.
        """
        tokens = self.tokenize(text)
        return TextField(tokens if max_tokens is None else tokens[:max_tokens], namespace=namespace)

    def batch_field(self, texts: Sequence[str], max_tokens: Optional[int] = None, namespace: str = "tokens") -> FieldBatch:
        """The tokens of many texts at once (each cut to `max_tokens`), as a column of a columnar
        dataset; the same tokens `text_field` gives one text at a time."""
        tokenize = self.tokenize
        if max_tokens is None:
            return FieldBatch(TOKENS, [tokenize(text) for text in texts], namespace)
        return FieldBatch(TOKENS, [tokenize(text)[:max_tokens] for text in texts], namespace)
