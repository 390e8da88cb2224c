"""The `regex` tokenizer: tokens are the matches of a regular expression."""

from __future__ import annotations

import re
from typing import List, Optional, Sequence

from ipuflow.config import ConfigurationError
from ipuflow.data.columnar.builder import TOKENS, FieldBatch
from ipuflow.data.tokenizers.tokenizer import Tokenizer

WORDS_AND_PUNCTUATION = r"\w+(?:'\w+)?|[^\w\s]"
"""Words (with an inner apostrophe: "don't", "film's") and single punctuation marks."""


@Tokenizer.register("regex")
class RegexTokenizer(Tokenizer):
    """Tokens are the non-overlapping matches of `pattern` (by default words and punctuation),
    lowercased unless `lowercase` is false."""

    def __init__(self, pattern: str = WORDS_AND_PUNCTUATION, lowercase: bool = True) -> None:
        try:
            self._regex = re.compile(pattern)
        except re.error as error:
            raise ConfigurationError(f"{pattern!r} is not a valid regular expression ({error}).", key="pattern") from None
        if self._regex.groups:
            # findall would return the groups instead of the whole matches.
            raise ConfigurationError(f"{pattern!r} has capturing groups; use non-capturing ones, (?:...).", key="pattern")
        self.pattern = pattern
        self.lowercase = lowercase

    def tokenize(self, text: str) -> List[str]:
        """The matches of the pattern in `text`."""
        return self._regex.findall(text.lower() if self.lowercase else text)

    def batch_field(self, texts: Sequence[str], max_tokens: Optional[int] = None, namespace: str = "tokens") -> FieldBatch:
        """The matches of many texts (each cut to `max_tokens`), in one tight loop."""
        findall = self._regex.findall
        if self.lowercase:
            tokens = [findall(text.lower())[:max_tokens] for text in texts]
        else:
            tokens = [findall(text)[:max_tokens] for text in texts]
        return FieldBatch(TOKENS, tokens, namespace)
