"""Atomic file writes: the old file stays intact until the new one is complete on disk."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Union


def write_atomically(path: Union[str, Path], write: Callable[[str], Any]) -> None:
    """Call ``write(temp_path)`` for a temporary file beside `path`, fsync it, and rename it over `path`."""
    path = Path(path)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(temp_name)
        with open(temp_name, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temp_name, path)
    except BaseException:
        if os.path.exists(temp_name):
            os.remove(temp_name)
        raise
    try:
        directory = os.open(path.parent, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def link_atomically(source: Union[str, Path], path: Union[str, Path]) -> None:
    """Make `path` name the same file as `source` (a hard link, so no second write), replacing
    `path` atomically; copies instead where the file system has no hard links."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.link")
    try:
        if temporary.exists():
            temporary.unlink()
        os.link(source, temporary)
        os.replace(temporary, path)
    except OSError:
        if temporary.exists():
            temporary.unlink()
        write_atomically(path, lambda temp_name: shutil.copyfile(source, temp_name))


def write_json_atomically(path: Union[str, Path], value: Any) -> None:
    """Write `value` as indented JSON, atomically."""

    def dump(temp_name: str) -> None:
        with open(temp_name, "w") as handle:
            json.dump(value, handle, indent=2)
            handle.write("\n")

    write_atomically(path, dump)
