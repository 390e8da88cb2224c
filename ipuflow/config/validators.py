"""The checks components run on their config values, worded the same everywhere.

Each takes the key (relative to the component's own config section, as its constructor knows it),
returns the value when it is good, and otherwise raises a `ConfigurationError` whose `expected` and
`found` say what is wrong; the resolver adds where the section sits in the config. With
``optional=True`` a null (None) is good too. Booleans are never numbers here: `true` for a count is
a config mistake, not 1.
"""

from __future__ import annotations

import math
from typing import Any, Collection, Optional, Sequence, TypeVar

from ipuflow.config.errors import ConfigurationError

T = TypeVar("T")


def _or_null(expected: str, optional: bool) -> str:
    return f"{expected} or null" if optional else expected


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def int_at_least(key: str, value: Any, minimum: int, optional: bool = False) -> Any:
    """`value` if it is an int >= `minimum` (or None, when optional)."""
    if value is None and optional:
        return None
    if not _is_int(value) or value < minimum:
        raise ConfigurationError(key=key, expected=_or_null(f"an int >= {minimum}", optional), found=value)
    return value


def positive_int(key: str, value: Any, optional: bool = False) -> Any:
    """`value` if it is an int >= 1 (or None, when optional)."""
    return int_at_least(key, value, 1, optional)


def non_negative_int(key: str, value: Any, optional: bool = False) -> Any:
    """`value` if it is an int >= 0 (or None, when optional)."""
    return int_at_least(key, value, 0, optional)


def positive_ints(key: str, values: Any) -> Sequence[int]:
    """`values` if it is a non-empty list of ints >= 1; a bad item is named by its index (``key.2``)."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigurationError(key=key, expected="a non-empty list of ints >= 1", found=values)
    for index, value in enumerate(values):
        positive_int(f"{key}.{index}", value)
    return values


def positive_number(key: str, value: Any, optional: bool = False) -> Any:
    """`value` as a float if it is a finite number > 0 (or None, when optional)."""
    if value is None and optional:
        return None
    if not _is_number(value) or value <= 0:
        raise ConfigurationError(key=key, expected=_or_null("a finite number > 0", optional), found=value)
    return float(value)


def non_negative_number(key: str, value: Any, optional: bool = False) -> Any:
    """`value` as a float if it is a finite number >= 0 (or None, when optional)."""
    if value is None and optional:
        return None
    if not _is_number(value) or value < 0:
        raise ConfigurationError(key=key, expected=_or_null("a number >= 0", optional), found=value)
    return float(value)


def probability(key: str, value: Any, optional: bool = False) -> Any:
    """`value` as a float if it is a number from 0 to 1 inclusive (or None, when optional)."""
    if value is None and optional:
        return None
    if not _is_number(value) or not 0 <= value <= 1:
        raise ConfigurationError(key=key, expected=_or_null("a probability (a number from 0 to 1)", optional),
                                 found=value)
    return float(value)


def fraction_below_one(key: str, value: Any) -> float:
    """`value` as a float if 0 <= value < 1 (a decay or an Adam beta)."""
    if not _is_number(value) or not 0 <= value < 1:
        raise ConfigurationError(key=key, expected="a number >= 0 and < 1", found=value)
    return float(value)


def choice(key: str, value: T, choices: Collection[Any], optional: bool = False) -> T:
    """`value` if it is one of `choices` (or None, when optional)."""
    if value is None and optional:
        return value
    if value not in choices:
        listed = ", ".join(repr(item) for item in choices)
        raise ConfigurationError(key=key, expected=_or_null(f"one of {listed}", optional), found=value)
    return value


def boolean(key: str, value: Any) -> bool:
    """`value` if it is true or false."""
    if not isinstance(value, bool):
        raise ConfigurationError(key=key, expected="true or false", found=value)
    return value


def optional_int(key: str, value: Any) -> Optional[int]:
    """`value` if it is any int or None."""
    if value is not None and not _is_int(value):
        raise ConfigurationError(key=key, expected="an int or null", found=value)
    return value
