"""Regular expressions that a config supplies, matched under a time limit.

A pattern in a config (a `freeze` list, an optimizer's `no_decay` or `parameter_groups`, an
archive's tokenizer pattern) may backtrack catastrophically: `(a|aa)+$` takes longer than a
lifetime on a few dozen characters. Python's `re` has no time limit; the `regex` module (the same
syntax) takes a timeout, so such patterns are compiled and matched with it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List

from ipuflow.config.errors import ConfigurationError

MATCH_SECONDS = 1.0
"""How long one pattern may take on one text (plus `MATCH_SECONDS_PER_MB` per MB of it)."""
MATCH_SECONDS_PER_MB = 1.0


class SlowPattern(ConfigurationError):
    """A pattern from a config took too long on a text (it backtracks catastrophically)."""


def compile_bounded(pattern: Any, key: str) -> Any:
    """`pattern` compiled with the `regex` module, whose matching takes a timeout; `key` is the
    config key holding it, for the error."""
    import regex

    if not isinstance(pattern, str):
        raise ConfigurationError(key=key, expected="a regular expression (a string)", found=pattern)
    try:
        return regex.compile(pattern)
    except (regex.error, re.error) as error:
        raise ConfigurationError(f"{pattern!r} is not a valid regular expression ({error}).", key=key) from None


def time_limit(text: str) -> float:
    """The seconds a pattern may take on `text`."""
    return MATCH_SECONDS + len(text) / 2**20 * MATCH_SECONDS_PER_MB


def slow_pattern(pattern: str, text: str, what: str, key: str = "") -> SlowPattern:
    """The error for `pattern` having taken longer than its time limit on `text`."""
    shown = text if len(text) <= 60 else text[:60] + "…"
    return SlowPattern(
        f"{what} {pattern!r} took more than {MATCH_SECONDS:g}s on one text of {len(text):,} characters ({shown!r}): "
        "it backtracks catastrophically (nested repetition such as (a|aa)+$). Write it without nested quantifiers "
        "that can match the same text.",
        key=key or None,
    )


def search_names(pattern: str, names: Iterable[str], key: str) -> List[str]:
    """The `names` (such as parameter names) in which `pattern` finds a match (`re.search`
    semantics), each search under the time limit; `key` is the config key holding the pattern."""
    compiled = compile_bounded(pattern, key)
    matched = []
    for name in names:
        try:
            if compiled.search(name, timeout=time_limit(name)):
                matched.append(name)
        except TimeoutError:
            raise slow_pattern(pattern, name, "the pattern", key) from None
    return matched
