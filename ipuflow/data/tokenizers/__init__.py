"""Tokenizers (Registrable): `whitespace` (default), `regex`, `pretrained_transformer`.

`pretrained_transformer` imports transformers only when one is built.
"""

from ipuflow.data.tokenizers.tokenizer import Tokenizer
from ipuflow.data.tokenizers.whitespace import WhitespaceTokenizer
from ipuflow.data.tokenizers.regex import RegexTokenizer
from ipuflow.data.tokenizers.pretrained_transformer import PretrainedTransformerTokenizer

__all__ = ["Tokenizer", "WhitespaceTokenizer", "RegexTokenizer", "PretrainedTransformerTokenizer"]
