"""Running `ipuflow train` under torchrun (2 CPU processes, gloo) and in one process, on the tiny
sentiment task of tests/experiment, and comparing what the runs leave behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from tests.conftest import ROOT
from tests.experiment.conftest import tiny_config, write_tiny_data

TORCHRUN_TIMEOUT = 240


def torchrun(args: List[str], nproc: int = 2, timeout: float = TORCHRUN_TIMEOUT,
             env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.CompletedProcess, float]:
    """`python -m torch.distributed.run --standalone --nproc_per_node N -m ipuflow ARGS` (a free port
    on localhost); the finished process and its wall time."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "ipuflow", *args]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def torchrun_worker(script: str, directory: Path) -> Dict[str, Any]:
    """Run the Python `script` in 2 gloo processes under torchrun; the JSON that it writes to the
    path given as its argument (rank 0's record)."""
    path, result = directory / "worker.py", directory / "result.json"
    path.write_text(script)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(path),
                           str(result)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=TORCHRUN_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text())


def single_process(args: List[str]) -> int:
    """`ipuflow ARGS` in this process."""
    from ipuflow.commands.cli import run

    return run(args)


def error_lines(done: subprocess.CompletedProcess) -> List[str]:
    """The lines where an ipuflow process reported an error."""
    return [line for line in (done.stdout + done.stderr).splitlines() if "ipuflow: error:" in line]


def load_weights(path: Path) -> Dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path))


def max_difference(first: Dict[str, Any], second: Dict[str, Any]) -> float:
    assert first.keys() == second.keys()
    return max(float((first[key].double() - second[key].double()).abs().max()) for key in first)


def read_json(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def task(tmp_path_factory):
    """The tiny task's data directory."""
    return write_tiny_data(tmp_path_factory.mktemp("distributed_task"))


def task_config(data_dir: Path, path: Path, executor: Dict[str, Any], **trainer: Any) -> Path:
    """A config for the tiny task with this executor block, written to `path`."""
    config = tiny_config(data_dir, **{"num_epochs": 2, **trainer})
    config["trainer"]["executor"] = {"device": "cpu", **executor}
    path.write_text(json.dumps(config))
    return path
