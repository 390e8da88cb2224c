"""Checks on the labels that readers find in data files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from ipuflow.config import ConfigurationError


def check_label(value: Any, where: str, key: str) -> Union[str, int]:
    """`value` if it can be a class label (a string or an int), else an error naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigurationError(f"{where}: the label {key!r} must be a string or an int, found {value!r}.")
    return value


class LabelPresence:
    """Checks that either every record of a file has a label or none has (a typo in the label key
    would otherwise silently give unlabelled training data)."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        self.first: Optional[bool] = None
        self.first_line = 0

    def check(self, has_label: bool, line_number: int) -> None:
        """Records whether the record at `line_number` has a label; an error if it differs from the first."""
        if self.first is None:
            self.first, self.first_line = has_label, line_number
        elif has_label != self.first:
            this, that = ("has", "has no") if has_label else ("has no", "has")
            raise ConfigurationError(
                f"{self.path}:{line_number}: this record {this} label {self.key!r} but the record at "
                f"line {self.first_line} {that}: label either every record or none."
            )
