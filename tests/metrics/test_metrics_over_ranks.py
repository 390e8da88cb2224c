"""Under torchrun a metric reports the figure of all ranks' rows together (its counts are summed over
the ranks when read), while each rank checkpoints only its own counts."""

import os
import subprocess
import sys

import pytest
import torch

from tests.conftest import ROOT
from tests.metrics.ranks_probe import CONFIGS, feed

from ipuflow.config import Params
from ipuflow.metrics import Metric


@pytest.mark.slow  # two torch processes: about 10 s on 2 cores
def test_two_ranks_report_what_one_process_reports_over_all_rows(tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(ROOT / "tests" / "metrics" / "ranks_probe.py"), str(tmp_path)]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in range(2)]

    whole = {name: Metric.from_params(Params(dict(config))) for name, config in CONFIGS.items()}
    feed(whole, slice(None))
    for name, metric in whole.items():
        expected = metric.get_metric()
        for rank in ranks:
            assert rank["values"][name] == pytest.approx(expected, abs=1e-6), name
            assert rank["after_reset"][name] == {key: 0.0 for key in expected}
    # Each rank's checkpoint holds its own rows only: rank 0 resumed alone reports its half.
    for rank, rows in ((0, slice(0, None, 2)), (1, slice(1, None, 2))):
        alone = {name: Metric.from_params(Params(dict(config))) for name, config in CONFIGS.items()}
        feed(alone, rows)
        for name, metric in alone.items():
            resumed = Metric.from_params(Params(dict(CONFIGS[name])))
            resumed.load_state_dict(ranks[rank]["states"][name])
            assert resumed.get_metric() == pytest.approx(metric.get_metric(), abs=1e-6), (name, rank)
