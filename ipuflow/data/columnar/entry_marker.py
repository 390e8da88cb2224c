"""The marker that makes a directory a data cache entry, and the checksums that vouch for its files.

The cache may share a folder with other things (run directories hold a `meta.json` too), so
pruning and `ipuflow cache clean` remove only directories that prove ipuflow built them: a name
that is a cache key, holding `ipuflow-cache-entry.json` of this kind, with that key and a random id
recorded at creation. The marker also records every file's size and the SHA-256 of every file up to
`CHECKSUMMED_BYTES` (the metadata, type tables, counts and label columns), so that an entry damaged
on disk (truncated, overwritten) is noticed on load and rebuilt instead of silently trusted.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Dict, Optional

from ipuflow.storage import file_sha256

MARKER_NAME = "ipuflow-cache-entry.json"
MARKER_KIND = "ipuflow data cache entry"
MARKER_FORMAT = 1
"""Bumped when the marker's meaning changes; part of every cache key."""
CHECKSUMMED_BYTES = 64 * 2**20
"""Files up to this size are checksummed (larger token columns get their size checked only)."""
KEY_PATTERN = re.compile(r"[0-9a-f]{40}")
PARTIAL_PATTERN = re.compile(r"([0-9a-f]{40})\.partial-[A-Za-z0-9_]+")
REMOVING_PATTERN = re.compile(r"([0-9a-f]{40})\.removing-[A-Za-z0-9_]+")


def read_marker(directory: Path) -> Optional[Dict[str, Any]]:
    """The marker in `directory` if it holds a readable one of this kind, else None."""
    try:
        with open(directory / MARKER_NAME, encoding="utf-8") as file:
            marker = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("kind") != MARKER_KIND or not isinstance(marker.get("id"), str):
        return None
    return marker


def start_entry(directory: Path, key: str) -> None:
    """Mark the directory where an entry for `key` is being built (before anything else is written)."""
    _write(directory, {"kind": MARKER_KIND, "format": MARKER_FORMAT, "key": key, "id": uuid.uuid4().hex,
                       "complete": False, "files": {}})


def finish_entry(directory: Path) -> None:
    """Record the sizes and checksums of the files built in `directory` (started by `start_entry`)."""
    marker = read_marker(directory)
    if marker is None:
        raise RuntimeError(f"{directory}: the data cache entry being built lost its marker {MARKER_NAME}.")
    files: Dict[str, Dict[str, Any]] = {}
    for path in sorted(directory.iterdir()):
        if path.name == MARKER_NAME or not path.is_file():
            continue
        size = path.stat().st_size
        files[path.name] = {"size": size, "sha256": file_sha256(path) if size <= CHECKSUMMED_BYTES else None}
    _write(directory, {**marker, "complete": True, "files": files})


def _write(directory: Path, marker: Dict[str, Any]) -> None:
    temporary = directory / f".{MARKER_NAME}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(marker, file, indent=1, sort_keys=True)
    os.replace(temporary, directory / MARKER_NAME)


def is_entry(directory: Path) -> bool:
    """Whether `directory` is a complete cache entry ipuflow built: named by its key, marked with it."""
    if not KEY_PATTERN.fullmatch(directory.name) or directory.is_symlink() or not directory.is_dir():
        return False
    marker = read_marker(directory)
    return marker is not None and marker.get("key") == directory.name and marker.get("complete") is True


def is_partial_entry(directory: Path) -> bool:
    """Whether `directory` is an entry an interrupted build left: named `<key>.partial-…` and marked
    with that key, or still empty (a build stopped before it wrote its marker)."""
    match = PARTIAL_PATTERN.fullmatch(directory.name)
    if match is None or directory.is_symlink() or not directory.is_dir():
        return False
    if not any(directory.iterdir()):
        return True
    marker = read_marker(directory)
    return marker is not None and marker.get("key") == match.group(1)


def is_removed_entry(directory: Path) -> bool:
    """Whether `directory` is what removing an entry left: `<key>.removing-…` holding nothing but
    that entry (or nothing)."""
    if REMOVING_PATTERN.fullmatch(directory.name) is None or directory.is_symlink() or not directory.is_dir():
        return False
    contents = list(directory.iterdir())
    if not contents:
        return True
    return [path.name for path in contents] == ["entry"] and read_marker(contents[0]) is not None


def damage(directory: Path) -> Optional[str]:
    """What is wrong with the complete entry at `directory` (a file missing, shorter or longer than
    built, or with other bytes), or None if its files are as they were built."""
    marker = read_marker(directory)
    if marker is None:
        return f"its marker {MARKER_NAME} is missing or unreadable"
    files = marker.get("files")
    if marker.get("complete") is not True or not isinstance(files, dict) or not files:
        return f"its marker {MARKER_NAME} records no files"
    for name, record in files.items():
        path = directory / str(name)
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if not isinstance(record, dict) or size != record.get("size"):
            return f"{name} holds {size} bytes, not the {record.get('size') if isinstance(record, dict) else '?'} it was built with"
        if record.get("sha256") is not None and file_sha256(path) != record["sha256"]:
            return f"{name} does not match the checksum recorded when it was built"
    return None
