"""The one exception type for bad configuration, and the helpers that word its messages."""

from __future__ import annotations

import difflib
from typing import Iterable, Optional


class ConfigurationError(Exception):
    """A config (or a command-line flag) asks for something that cannot be built.

    The CLI prints its message as one paragraph and exits with code 2, without a traceback.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def closest_match(name: str, candidates: Iterable[str]) -> Optional[str]:
    """The candidate that looks most like `name` (`_`/`-` swaps first), or None if none is close."""
    candidates = list(candidates)
    for swapped in (name.replace("-", "_"), name.replace("_", "-")):
        if swapped != name and swapped in candidates:
            return swapped
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' Did you mean X?' when a close candidate exists, else ''."""
    match = closest_match(name, candidates)
    return f" Did you mean {match!r}?" if match else ""
