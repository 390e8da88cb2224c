"""Reading JSON-lines files record by record, with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

from ipuflow.config import ConfigurationError
from ipuflow.data.readers.text_lines import utf8_lines


def read_json_lines(path: Path) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """(line number, object) for each non-blank line of the JSON-lines file at `path`."""
    for line_number, line in enumerate(utf8_lines(path), start=1):
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

def require_key(record: Dict[str, Any], key: str, where: str) -> Any:
    """`record[key]`, or an error naming `where` and the keys that are there."""
    if key not in record:
        raise ConfigurationError(f"{where}: no key {key!r} (keys found: {sorted(record)}).")
    return record[key]
