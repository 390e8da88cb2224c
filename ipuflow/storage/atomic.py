"""Atomic file writes: the old file stays intact until the new one is complete on disk."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, List, Optional, Union

from ipuflow.storage.failures import disk_nearly_full, is_storage_failure, storage_failure


def _create_temporary(path: Path) -> str:
    """Create an empty, uniquely named file beside `path`, with the mode a plain ``open`` would
    give it (0666 less the umask; ``tempfile.mkstemp`` would make it 0600)."""
    while True:
        temp_name = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return temp_name
        except FileExistsError:
            continue


def write_atomically(path: Union[str, Path], write: Callable[[str], Any]) -> None:
    """Call ``write(temp_path)`` for a temporary file beside `path`, fsync it, and rename it over
    `path`. The file gets the permissions the umask gives, as with ``open``."""
    path = Path(path)
    temp_name = _create_temporary(path)
    try:
        mode = os.stat(temp_name).st_mode
        write(temp_name)
        if os.stat(temp_name).st_mode != mode:
            # Some writers (safetensors) replace the file with a private one; give the mode back.
            os.chmod(temp_name, stat.S_IMODE(mode))
        with open(temp_name, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temp_name, path)
    except BaseException as error:
        # Judged before the partial file is removed, while the disk is still as full as it was.
        full = isinstance(error, (OSError, RuntimeError)) and (is_storage_failure(error) or disk_nearly_full(path.parent))
        if os.path.exists(temp_name):
            os.remove(temp_name)
        if full:
            raise storage_failure(error, path) from error
        raise
    sync_directory(path.parent)


def sync_directory(directory: Union[str, Path]) -> None:
    """Flush `directory`'s entries to disk, so that a rename into it survives a power cut."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


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
        # rename() does nothing when both names are already links to one file: drop the temporary.
        if temporary.exists():
            temporary.unlink()
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


def write_text_atomically(path: Union[str, Path], text: str) -> None:
    """Write `text` as UTF-8, atomically."""

    def dump(temp_name: str) -> None:
        with open(temp_name, "w", encoding="utf-8") as handle:
            handle.write(text)

    write_atomically(path, dump)


def write_directory_atomically(path: Union[str, Path], write: Callable[[Path], Any]) -> None:
    """Call ``write(temp_dir)`` for a temporary directory beside `path`, then rename it to `path`:
    the directory appears complete or not at all. An existing `path` is replaced (moved aside
    first, removed after)."""
    path = Path(os.path.abspath(path))  # "." and ".." have no name to put aside
    temporary = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=_TEMPORARY_DIRECTORY_SUFFIX, dir=path.parent))
    try:
        write(temporary)
        for written in temporary.iterdir():
            with open(written, "rb+") as handle:
                os.fsync(handle.fileno())
        aside = _move_aside(path)
        try:
            os.replace(temporary, path)
        except BaseException:
            if aside is not None:  # put the old directory back
                os.replace(aside / path.name, path)
                aside.rmdir()
            raise
        if aside is not None:
            shutil.rmtree(aside)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _move_aside(path: Path) -> Optional[Path]:
    """Move an existing `path` into a new temporary directory beside it (returned), or None if there
    is nothing at `path`; the temporary directory does not outlive a failed move."""
    if not path.exists() and not path.is_symlink():
        return None
    aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=_TEMPORARY_DIRECTORY_SUFFIX, dir=path.parent))
    try:
        os.replace(path, aside / path.name)
    except BaseException:
        aside.rmdir()
        raise
    return aside


_TEMPORARY_DIRECTORY_SUFFIX = ".tmpdir"
# The names write_atomically, link_atomically and write_directory_atomically give their temporaries.
_TEMPORARY_NAME = re.compile(r"^\..+\.(tmp|tmpdir|\d+\.link)$")


def remove_interrupted_writes(directory: Union[str, Path]) -> List[str]:
    """Remove the temporary files and directories that a process killed mid-write left in
    `directory` (not its subdirectories); the names removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir()):
        if _TEMPORARY_NAME.match(entry.name):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed
