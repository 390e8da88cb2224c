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


@pytest.fixture(autouse=True, scope="session")
def _torch_threads_as_torch_sets_them():
    """The suite runs with torch's own thread count (one per core), in this process and in the CLI
    processes it starts: `num_threads: "auto"` (the default) follows OMP_NUM_THREADS where it is set.
    A count chosen from the machine's load could differ between two processes of one test, and with
    it the order of their float sums (tests compare runs bit for bit); test_auto_threads tests "auto"."""
    import os

    import torch

    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    yield
