"""The on-disk cache of built columnar datasets, safe when several processes build at once.

An entry is a directory named by a hash of everything the data depends on (the reader's and
tokenizer's settings, the data file's identity and the column format version). Builders take an
exclusive file lock on the entry's key, so under torchrun one rank builds while the others wait
and then map the finished entry; an entry is built under a temporary name and renamed into place
when complete, so a crash never leaves a half-built entry that a later run would trust. Each entry
carries a marker (see `entry_marker`) with its key, a random id and its files' checksums: only
marked directories are ever loaded or removed, and one whose files no longer match is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional

from ipuflow.config import ConfigurationError
from ipuflow.data.columnar.cache_location import CACHE_DIR_ENV, default_cache_directory
from ipuflow.data.columnar.dataset import ColumnarDataset
from ipuflow.data.columnar.entry_lock import exclusive
from ipuflow.storage.failures import is_storage_failure, storage_failure
from ipuflow.data.columnar.entry_marker import MARKER_FORMAT, MARKER_NAME, damage, finish_entry, is_entry, start_entry
from ipuflow.data.columnar.pruning import PARTIAL, mark_used, max_cache_size, prune

logger = logging.getLogger(__name__)

NO_CACHE_ENV = "IPUFLOW_NO_DATA_CACHE"
"""Environment variable: set to 1 (as `ipuflow train --no-cache` does) to build every dataset afresh."""
HASHED_BYTES = 1 << 20
"""How much of a data file's head and of its tail is hashed into its identity."""


@dataclass
class DataCache:
    """Where built datasets are cached, and whether at all."""

    directory: Optional[Path] = None
    enabled: bool = True

    @classmethod
    def from_settings(cls, directory: Optional[str], enabled: bool) -> "DataCache":
        """The cache for these config settings; the environment variables override them."""
        if os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0", "false", "False"):
            enabled = False
        if os.environ.get(CACHE_DIR_ENV):
            return cls(default_cache_directory(), enabled)
        return cls(Path(directory).expanduser() if directory else default_cache_directory(), enabled)


def file_identity(path: Path) -> Dict[str, Any]:
    """What identifies a data file's content for the cache: its size, modification time (ns) and a
    SHA-256 of its first and last MiB (the whole file when it is under 2 MiB)."""
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        digest.update(file.read(HASHED_BYTES))
        if stat.st_size > HASHED_BYTES:
            file.seek(max(HASHED_BYTES, stat.st_size - HASHED_BYTES))
            digest.update(file.read(HASHED_BYTES))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_tail_sha256": digest.hexdigest()}


def cache_key(parts: Mapping[str, Any]) -> str:
    """The entry name for these key parts (any JSON-serialisable description)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def cached_dataset(cache: DataCache, key_parts: Mapping[str, Any], build: Callable[[Path], None],
                   description: str = "") -> ColumnarDataset:
    """The dataset `build(directory)` writes, from the cache when an entry for `key_parts` exists.

    Without a cache the dataset is built in a temporary directory, which is removed as soon as its
    files are mapped (the maps stay valid until the dataset is dropped).
    """
    if not cache.enabled or cache.directory is None:
        scratch = Path(tempfile.mkdtemp(prefix="ipuflow-data-"))
        try:
            build(scratch)
            return ColumnarDataset(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    key = cache_key({**key_parts, "entry_marker": MARKER_FORMAT})
    entry = cache.directory / key
    loaded = _load(entry, description)
    if loaded is not None:
        return loaded
    try:
        cache.directory.mkdir(parents=True, exist_ok=True)
        with exclusive(cache.directory / f"{key}.lock"):
            loaded = _load(entry, description)  # another process may have built it while this one waited
            if loaded is not None:
                return loaded
            _clear_the_way(entry)
            partial = Path(tempfile.mkdtemp(prefix=f"{key}{PARTIAL}", dir=cache.directory))
            try:
                start_entry(partial, key)
                started = time.perf_counter()
                build(partial)
                with open(partial / "key.json", "w", encoding="utf-8") as file:
                    json.dump({**key_parts, "description": description}, file, indent=1, sort_keys=True, default=str)
                finish_entry(partial)
                os.replace(partial, entry)
                logger.info("Built %s in %.1fs and cached it in %s", description or "a dataset",
                            time.perf_counter() - started, entry)
            finally:
                shutil.rmtree(partial, ignore_errors=True)
            dataset = ColumnarDataset(entry)
    except OSError as error:
        if not is_storage_failure(error):
            raise
        raise storage_failure(
            error, f"the data cache {cache.directory}",
            f"Or give another cache directory ({CACHE_DIR_ENV} or dataset_reader.cache_directory), or build the "
            "data without the cache: ipuflow train --no-cache (or IPUFLOW_NO_DATA_CACHE=1).",
        ) from None
    prune(cache.directory, max_cache_size(), keep=[entry])
    return dataset


def _load(entry: Path, description: str) -> Optional[ColumnarDataset]:
    """The cached dataset at `entry`, marked as used; None if there is none, it was just pruned, or
    its files no longer match their checksums."""
    if not is_entry(entry) or damage(entry) is not None:
        return None
    try:
        dataset = ColumnarDataset(entry)
    except FileNotFoundError:  # pruned by another process between the check and the mapping
        return None
    mark_used(entry)
    logger.info("Loaded %s from the data cache (%s)", description or "a dataset", entry)
    return dataset


def _clear_the_way(entry: Path) -> None:
    """Remove a damaged entry at `entry` (with a warning naming it) before it is rebuilt; refuse to
    touch anything there that is not a cache entry (this runs under the key's lock)."""
    if not os.path.lexists(entry):
        return
    if entry.is_symlink() or not entry.is_dir() or not (entry / MARKER_NAME).is_file():
        raise ConfigurationError(
            f"The data cache holds {entry}, which is not a data cache entry (it has no {MARKER_NAME}), where the "
            "entry for this dataset belongs. ipuflow removes only what it built: move it away, or use another "
            f"cache directory ({CACHE_DIR_ENV})."
        )
    reason = damage(entry) if is_entry(entry) else f"its marker {MARKER_NAME} is unreadable or incomplete"
    logger.warning("The data cache entry %s is damaged (%s); removing and rebuilding it.", entry, reason)
    doomed = Path(tempfile.mkdtemp(prefix=f"{entry.name}.removing-", dir=entry.parent))
    os.replace(entry, doomed / "entry")
    shutil.rmtree(doomed, ignore_errors=True)
