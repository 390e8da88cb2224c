"""Reading JSON-lines files record by record, with errors that name the file and line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import orjson

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



def json_line_chunks(path: Path, size: int) -> Iterator[Tuple[int, List[bytes]]]:
    """(first line number, lines) for runs of `size` raw lines (bytes) of the file at `path`."""
    with open(path, "rb") as file:
        first = 1
        while True:
            lines = list(itertools.islice(file, size))
            if not lines:
                return
            yield first, lines
            first += len(lines)


def parse_json_chunk(lines: List[bytes]) -> Optional[List[Dict[str, Any]]]:
    """The objects of JSON lines (blank lines skipped), parsed by one call of orjson (a fast JSON
    parser, which also checks the UTF-8); None when any line is not a UTF-8 JSON object (then
    `raise_first_error` names it)."""
    lines = [line for line in lines if not line.isspace()]
    if not lines:
        return []
    text = b"[" + b",".join(lines) + b"]"
    try:
        records = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and the json module reads: NaN, Infinity, integers beyond 64 bits
            records = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
    if len(records) != len(lines) or set(map(type, records)) != {dict}:
        return None
    return records


def raise_first_error(path: Path) -> None:
    """Read the file at `path` line by line and raise the error of its first bad line."""
    for _ in read_json_lines(path):
        pass
    raise ConfigurationError(f"{path}: not valid JSON lines.")  # a chunk failed that no single line explains
