"""Shared test set-up: the repository root on sys.path, so the suite runs from a checkout."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _isolated_data_cache(tmp_path_factory):
    """Columnar datasets built by tests (and the CLI subprocesses they start) go to a scratch cache."""
    import os

    os.environ["IPUFLOW_DATA_CACHE_DIR"] = str(tmp_path_factory.mktemp("data-cache"))
    yield
