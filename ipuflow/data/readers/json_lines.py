"""Reading JSON-lines files record by record, with errors that name the file and line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

from ipuflow.config import ConfigurationError


def read_json_lines(path: Path) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """(line number, object) for each non-blank line of the JSON-lines file at `path`."""
    with open(path, encoding="utf-8") as file:
        try:
            for line_number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ConfigurationError(f"{path}:{line_number}: not valid JSON ({error.msg} at column {error.colno}).") from None
                if not isinstance(record, dict):
                    raise ConfigurationError(
                        f"{path}:{line_number}: expected a JSON object per line, found {type(record).__name__}."
                    )
                yield line_number, record
        except UnicodeDecodeError as error:
            raise ConfigurationError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start} of a block).") from None


def require_key(record: Dict[str, Any], key: str, where: str) -> Any:
    """`record[key]`, or an error naming `where` and the keys that are there."""
    if key not in record:
        raise ConfigurationError(f"{where}: no key {key!r} (keys found: {sorted(record)}).")
    return record[key]


def read_json_line_batches(path: Path, size: int) -> Iterator[List[Dict[str, Any]]]:
    """The objects of the JSON-lines file at `path`, `size` lines at a time (blank lines skipped).

    Each batch is parsed by one call of the JSON parser; when a batch has an error, the file is read
    again line by line (`read_json_lines`) for the error that names the line.
    """
    with open(path, encoding="utf-8") as file:
        try:
            while True:
                lines = [line for line in itertools.islice(file, size) if not line.isspace()]
                if not lines:
                    return
                try:
                    records = json.loads("[" + ",".join(lines) + "]")
                except json.JSONDecodeError:
                    records = None
                if records is None or len(records) != len(lines) or not all(type(record) is dict for record in records):
                    break
                yield records
        except UnicodeDecodeError:
            pass
    for _ in read_json_lines(path):  # raises the error that stopped the batches, naming its line
        pass
    raise ConfigurationError(f"{path}: not valid JSON lines.")  # a batch failed that no single line explains
