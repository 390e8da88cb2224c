"""The `whitespace` tokenizer: tokens are the runs of non-space characters."""

from __future__ import annotations

from typing import List

from ipuflow.data.tokenizers.tokenizer import Tokenizer


@Tokenizer.register("whitespace")
class WhitespaceTokenizer(Tokenizer):
    """Splits on any whitespace, optionally lowercasing first."""

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    def tokenize(self, text: str) -> List[str]:
        """The whitespace-separated tokens of `text`."""
        return (text.lower() if self.lowercase else text).split()
