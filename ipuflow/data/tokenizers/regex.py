"""The `regex` tokenizer: tokens are the matches of a regular expression."""

from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Any, Iterator, List, Optional, Pattern, Sequence

from ipuflow.config import ConfigurationError
from ipuflow.config.bounded_regex import compile_bounded, slow_pattern, time_limit
from ipuflow.data.columnar.builder import TOKENS, FieldBatch, SeparatedTokens
from ipuflow.data.tokenizers.tokenizer import Tokenizer

WORDS_AND_PUNCTUATION = r"\w+(?:'\w+)?|[^\w\s]"
"""Words (with an inner apostrophe: "don't", "film's") and single punctuation marks."""


def _possessive_default() -> Pattern[str]:
    """`WORDS_AND_PUNCTUATION` with possessive quantifiers (Python 3.11 on), about a tenth faster:
    nothing after either quantifier can fail, so giving up their backtracking changes no match."""
    try:
        return re.compile(r"\w++(?:'\w+)?+|[^\w\s]")
    except re.error:  # Python before 3.11
        return re.compile(WORDS_AND_PUNCTUATION)


_POSSESSIVE_DEFAULT = _possessive_default()

SEPARATOR_TOKEN = "\x00"
"""A character no text normally holds, which `WORDS_AND_PUNCTUATION` matches as a token of its own."""
BATCH_SEPARATOR = "\n" + SEPARATOR_TOKEN + "\n"
"""What joins a batch's texts: the newlines keep any match from running into the separator, and
they lowercase as a text's end and start do (the final-sigma rule sees no cased letter there)."""


_untrusted = contextvars.ContextVar("ipuflow_untrusted_patterns", default=False)


@contextlib.contextmanager
def patterns_from_untrusted_config() -> Iterator[None]:
    """Regex tokenizers built inside run their patterns with a time limit (the `regex` module's
    timeout, about four times slower than `re`): for configs from archives, which anyone may write.
    A pattern in your own config runs with `re`, at full speed."""
    token = _untrusted.set(True)
    try:
        yield
    finally:
        _untrusted.reset(token)


@Tokenizer.register("regex")
class RegexTokenizer(Tokenizer):
    """Tokens are the non-overlapping matches of `pattern` (by default words and punctuation),
    lowercased unless `lowercase` is false."""

    def __init__(self, pattern: str = WORDS_AND_PUNCTUATION, lowercase: bool = True) -> None:
        # The default pattern is linear; an archive's may not be (see `patterns_from_untrusted_config`).
        self._bounded = pattern != WORDS_AND_PUNCTUATION and _untrusted.get()
        if pattern == WORDS_AND_PUNCTUATION:
            self._regex: Any = _POSSESSIVE_DEFAULT
        elif self._bounded:
            self._regex = compile_bounded(pattern, "pattern")
        else:
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
        return self._findall(text.lower() if self.lowercase else text)

    def _findall(self, text: str) -> List[str]:
        if not self._bounded:
            return self._regex.findall(text)
        try:
            return self._regex.findall(text, timeout=time_limit(text))
        except TimeoutError:
            raise slow_pattern(self.pattern, text, "the regex tokenizer's pattern") from None

    def batch_field(self, texts: Sequence[str], max_tokens: Optional[int] = None, namespace: str = "tokens") -> FieldBatch:
        """The matches of many texts (each cut to `max_tokens`), interned.

        With the default pattern the texts are joined with a separator that it matches as a token
        of its own and no match can span (a newline on each side of a NUL), so one `findall` and
        one lowercasing cover the whole batch, and numpy cuts the matches back into texts.
        """
        joined = BATCH_SEPARATOR.join(texts)
        if self.pattern == WORDS_AND_PUNCTUATION and texts and joined.count(SEPARATOR_TOKEN) == len(texts) - 1:
            flat = self._regex.findall(joined.lower() if self.lowercase else joined)
            return FieldBatch(TOKENS, SeparatedTokens(flat, SEPARATOR_TOKEN, len(texts), max_tokens), namespace)
        findall = self._findall
        if self.lowercase:
            tokens = [findall(text.lower())[:max_tokens] for text in texts]
        else:
            tokens = [findall(text)[:max_tokens] for text in texts]
        return FieldBatch(TOKENS, tokens, namespace)
