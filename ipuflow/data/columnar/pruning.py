"""Keeping the data cache bounded: when it holds more than its size limit, the entries used least
recently are removed (as ccache does), and `ipuflow cache` lists and cleans it by hand."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional

from ipuflow.config import ConfigurationError
from ipuflow.data.columnar.entry_lock import exclusive_if_free
from ipuflow.data.columnar.entry_marker import KEY_PATTERN, is_entry, is_partial_entry, is_removed_entry

logger = logging.getLogger(__name__)

MAX_SIZE_ENV = "IPUFLOW_DATA_CACHE_MAX_SIZE"
"""Environment variable: the data cache's size limit, such as `50GB` or `500MB`; `0` or `none` for no limit."""
DEFAULT_MAX_SIZE = 20 * 2**30
"""The size limit when `$IPUFLOW_DATA_CACHE_MAX_SIZE` is not set: 20 GiB."""
PARTIAL = ".partial-"
"""What the name of an entry being built holds (`<key>.partial-XXXX`)."""

_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str, where: str) -> int:
    """Bytes from `text` such as `20GB`, `1.5G`, `500MB` or `1048576` (units are powers of 1024);
    an error naming `where` otherwise."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if match is None or match.group(2).upper() not in _UNITS:
        raise ConfigurationError(f"{where}: expected a size such as 20GB, 500MB or 0, found {text!r}.")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def max_cache_size() -> Optional[int]:
    """The cache's size limit in bytes (None: no limit), from `$IPUFLOW_DATA_CACHE_MAX_SIZE`."""
    text = os.environ.get(MAX_SIZE_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_SIZE
    if text.lower() == "none":
        return None
    return parse_size(text, MAX_SIZE_ENV) or None


@dataclass
class CacheEntry:
    """One built dataset in the cache."""

    path: Path
    size: int
    last_used: float  # seconds since the epoch: the entry's modification time, renewed by every load
    source: str  # what it was built from (from key.json), for people

    @property
    def key(self) -> str:
        return self.path.name


def mark_used(entry: Path) -> None:
    """Renew `entry`'s last use (its directory's modification time), which orders pruning."""
    try:
        os.utime(entry)
    except OSError:  # a read-only cache still serves its entries
        pass


def _size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.is_file())


def _source(entry: Path) -> str:
    try:
        with open(entry / "key.json", encoding="utf-8") as file:
            return str(json.load(file).get("description") or "?")
    except (OSError, ValueError, AttributeError):
        return "?"


def list_entries(directory: Path) -> List[CacheEntry]:
    """The complete entries in the cache at `directory`, least recently used first: only directories
    that carry ipuflow's cache-entry marker (see `entry_marker`); anything else there is not the
    cache's to list or remove."""
    if not directory.is_dir():
        return []
    entries = []
    for path in directory.iterdir():
        if is_entry(path):
            try:
                entries.append(CacheEntry(path, _size(path), path.stat().st_mtime, _source(path)))
            except FileNotFoundError:  # removed meanwhile by another process
                continue
    return sorted(entries, key=lambda entry: entry.last_used)


def remove_entry(entry: Path) -> bool:
    """Remove a cache entry unless a process is building its key now; whether it was removed.

    It is renamed away first, so no process finds it half-removed; processes that have it mapped
    keep reading it (POSIX keeps removed files' data until they are closed).
    """
    key = entry.name.split(PARTIAL)[0]
    if not KEY_PATTERN.fullmatch(key):
        return False
    lock_path = entry.parent / f"{key}.lock"
    with exclusive_if_free(lock_path) as free:
        if not free:
            return False
        doomed = Path(tempfile.mkdtemp(prefix=f"{key}.removing-", dir=entry.parent))
        try:
            os.replace(entry, doomed / "entry")
        except FileNotFoundError:
            doomed.rmdir()
            return False
        if PARTIAL not in entry.name:
            lock_path.unlink(missing_ok=True)  # while held: see entry_lock
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def prune(directory: Path, max_size: Optional[int], keep: Iterable[Path] = (), older_than_days: Optional[float] = None) -> List[CacheEntry]:
    """Remove entries until the cache holds at most `max_size` bytes (least recently used first),
    and entries unused for more than `older_than_days`, never those in `keep`; also what interrupted
    builds left. Only what carries the cache-entry marker is touched. The removed entries."""
    kept = {Path(path).resolve() for path in keep}
    for leftover in directory.glob(f"*{PARTIAL}*") if directory.is_dir() else []:
        if is_partial_entry(leftover):
            remove_entry(leftover)  # only when no process is building that key
    for leftover in directory.glob("*.removing-*") if directory.is_dir() else []:
        if is_removed_entry(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    entries = list_entries(directory)
    total = sum(entry.size for entry in entries)
    now = time.time()
    removed = []
    for entry in entries:
        too_old = older_than_days is not None and now - entry.last_used > older_than_days * 86400
        too_big = max_size is not None and total > max_size
        if not (too_old or too_big) or entry.path.resolve() in kept:
            continue
        if remove_entry(entry.path):
            total -= entry.size
            removed.append(entry)
    if removed:
        logger.info("Pruned %d data cache entr%s (%.1f MB) from %s", len(removed), "y" if len(removed) == 1 else "ies",
                    sum(entry.size for entry in removed) / 2**20, directory)
    if max_size is not None and total > max_size:
        logger.warning("The data cache %s holds %.1f GB, over its limit of %.1f GB, in entries in use; set %s to raise it.",
                       directory, total / 2**30, max_size / 2**30, MAX_SIZE_ENV)
    return removed
