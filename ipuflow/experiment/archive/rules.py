"""The kinds of value an archive's config may give a key, each with its bounds.

A rule checks one value from an archive and returns it (or raises a `ConfigurationError` naming
the key path, what it allows and what was found). `Component` rules check a nested component
against its own allow-list (`archive_schema`), so every key of every component is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ipuflow.config import ConfigurationError

OVERRIDE_NOTE = "Set it yourself with -o/--overrides if you mean it: your own overrides may set anything."

Check = Callable[[Any, str], Any]
"""A rule: (value, key path) → the value, or a `ConfigurationError`."""


def refused(path: str, expected: str, found: Any) -> ConfigurationError:
    """The error for a value an archive may not give."""
    return ConfigurationError(path=path, expected=f"{expected} in a model archive's config", found=found,
                              reason=OVERRIDE_NOTE)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Int:
    """An integer in [low, high] (or null when `optional`)."""

    low: int
    high: int
    optional: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if value is None and self.optional:
            return value
        if not _is_int(value) or not self.low <= value <= self.high:
            raise refused(path, f"an integer from {self.low:,} to {self.high:,}", value)
        return value


@dataclass(frozen=True)
class Number:
    """A number in [low, high]."""

    low: float
    high: float
    optional: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if value is None and self.optional:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            raise refused(path, f"a number from {self.low:g} to {self.high:g}", value)
        return value


def boolean(value: Any, path: str) -> Any:
    """True or false."""
    if not isinstance(value, bool):
        raise refused(path, "true or false", value)
    return value


@dataclass(frozen=True)
class Text:
    """A string of at most `length` characters (or null when `optional`)."""

    length: int = 256
    optional: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if value is None and self.optional:
            return value
        if not isinstance(value, str) or len(value) > self.length:
            raise refused(path, f"a string of at most {self.length:,} characters", value)
        return value


@dataclass(frozen=True)
class Choice:
    """One of a few strings."""

    choices: Tuple[str, ...]

    def __call__(self, value: Any, path: str) -> Any:
        if value not in self.choices:
            raise refused(path, "one of " + ", ".join(repr(choice) for choice in self.choices), value)
        return value


@dataclass(frozen=True)
class ListOf:
    """A list of at most `length` items, each passing `item` (or null when `optional`)."""

    item: Check
    length: int
    optional: bool = False

    def __call__(self, value: Any, path: str) -> Any:
        if value is None and self.optional:
            return value
        if not isinstance(value, list) or len(value) > self.length:
            raise refused(path, f"a list of at most {self.length:,} items", value)
        return [self.item(entry, f"{path}.{index}") for index, entry in enumerate(value)]


@dataclass(frozen=True)
class Either:
    """A value passing any of `rules` (the first one's error otherwise)."""

    rules: Tuple[Check, ...]

    def __call__(self, value: Any, path: str) -> Any:
        for rule in self.rules[1:]:
            try:
                return rule(value, path)
            except ConfigurationError:
                pass
        return self.rules[0](value, path)


@dataclass(frozen=True)
class JsonData:
    """Plain JSON data (a transformers config dict) with at most `entries` values in all, strings
    of at most 256 characters, and none of the keys `refused_keys` at any depth."""

    entries: int = 1024
    refused_keys: Tuple[str, ...] = ()

    def __call__(self, value: Any, path: str) -> Any:
        budget = [self.entries]
        self._check(value, path, budget, 0)
        return value

    def _check(self, value: Any, path: str, budget: List[int], depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > 8:
            raise refused(path, f"an object of at most {self.entries:,} values, nested at most 8 deep", "more")
        if isinstance(value, str) and len(value) > 256:
            raise refused(path, "strings of at most 256 characters", value)
        if isinstance(value, dict):
            for key, entry in value.items():
                if key in self.refused_keys:
                    raise refused(f"{path}.{key}", "no such key (it would make transformers load code or kernels)",
                                  entry)
                self._check(entry, f"{path}.{key}", budget, depth + 1)
        elif isinstance(value, list):
            for index, entry in enumerate(value):
                self._check(entry, f"{path}.{index}", budget, depth + 1)


@dataclass(frozen=True)
class Component:
    """A nested component of `family`, checked against its type's own allow-list (a bare string
    is its type); `mapping`: an object of such components by name (a model's `metrics`)."""

    family: str
    optional: bool = False
    mapping: bool = False


@dataclass(frozen=True)
class Drop:
    """A key inference never needs, dropped from an archive's config; `noted` keys are named in
    the log (a user might have expected them), the others (training-only) are dropped quietly."""

    noted: bool = True


@dataclass(frozen=True)
class Keys:
    """A component's allow-list (or a plain section's): each key an archive may give and its rule
    (a check, a `Component`, a nested `Keys` or `Drop`); `checks` over several keys at once (such
    as windows that must advance); `others`: what becomes of any other key (refused if None)."""

    rules: Dict[str, Any]
    checks: Sequence[Callable[[Dict[str, Any], str], None]] = ()
    others: Optional[Drop] = None
