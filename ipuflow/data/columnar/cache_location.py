"""Where the data cache is: a module of its own so that `ipuflow cache` finds it without importing
the datasets (numpy, torch)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "IPUFLOW_DATA_CACHE_DIR"
"""Environment variable: the cache directory (wins over `dataset_reader.cache_directory`)."""


def default_cache_directory() -> Path:
    """`$IPUFLOW_DATA_CACHE_DIR`, else `$XDG_CACHE_HOME/ipuflow/data` (`~/.cache/ipuflow/data`)."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ipuflow" / "data"
