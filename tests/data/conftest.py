"""Fixtures of the data tests."""

import pytest

from ipuflow.data.columnar.pruning import MAX_SIZE_ENV


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A data cache of its own for the test (through $IPUFLOW_DATA_CACHE_DIR), under the default size limit."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("IPUFLOW_DATA_CACHE_DIR", str(directory))
    monkeypatch.delenv("IPUFLOW_NO_DATA_CACHE", raising=False)
    monkeypatch.delenv(MAX_SIZE_ENV, raising=False)
    return directory
