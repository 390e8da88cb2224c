"""The one exception type for bad configuration, and the helpers that word its messages."""

from __future__ import annotations

import difflib
import json
from typing import Any, Iterable, Optional

NOT_GIVEN: Any = object()
"""`found` when the error does not say what was found."""


class ConfigurationError(Exception):
    """A config (or a command-line flag) asks for something that cannot be built.

    The CLI prints it as one paragraph and exits with code 2, without a traceback. Its parts:

    * `key`: the config key it is about, relative to the section whose code raised it
      (``"batch_size"`` in a data loader, ``"betas.0"``, ``""`` for the section itself), or None
      for an error about no key (a missing file);
    * `path`: the full key path (``"validation_data_loader.batch_size"``). The resolver sets it from
      `key` as the error leaves the section's constructor (`locate`), because only the resolver
      knows where the section sits in this config; code that holds the whole config gives it;
    * `expected` and `found`: what the key should hold and what it holds;
    * `reason`: the rest of the explanation (or all of it, for an error without `expected`).
    """

    def __init__(
        self,
        reason: str = "",
        *,
        key: Optional[str] = None,
        path: Optional[str] = None,
        expected: Optional[str] = None,
        found: Any = NOT_GIVEN,
    ) -> None:
        self.reason = reason
        self.key = key
        self.path = path
        self.expected = expected
        self.found = found
        super().__init__(self.message)

    @property
    def location(self) -> Optional[str]:
        """The key path to name: the full one once known, else the relative key."""
        return self.path if self.path is not None else self.key

    @property
    def explanation(self) -> str:
        """The message without its key path: what was expected, what was found, and why."""
        parts = []
        if self.expected is not None:
            found = "" if self.found is NOT_GIVEN else f", found {describe_value(self.found)}"
            parts.append(f"expected {self.expected}{found}.")
        if self.reason:
            parts.append(self.reason)
        return " ".join(parts)

    @property
    def message(self) -> str:
        """The paragraph the CLI prints: ``key.path: explanation``."""
        location = self.location
        return f"{location}: {self.explanation}" if location else self.explanation

    def locate(self, section: str) -> "ConfigurationError":
        """Give a relative `key` its full path under `section` (a key path prefix such as
        ``"trainer.executor."``); an error that already has its path, or has no key, is unchanged."""
        if self.path is None and self.key is not None:
            self.path = f"{section}{self.key}" if self.key else section.rstrip(".")
            self.args = (self.message,)
        return self

    def __str__(self) -> str:
        return self.message


def describe_value(value: Any) -> str:
    """A short, human description of a config value and its JSON type, for error messages."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    if isinstance(value, (list, tuple)) and len(value) <= 8 and all(
            isinstance(item, (bool, int, float, str, type(None))) for item in value):
        shown: Optional[str] = json.dumps(list(value))
    else:
        shown = json.dumps(value) if isinstance(value, (bool, int, float, str, type(None))) else None
    if shown is not None and len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{kind} ({shown})" if shown is not None and value is not None else kind


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
