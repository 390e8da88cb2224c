"""Issue 23.9: an error raised identically on every rank is printed once (by rank 0), while an error of
one rank's own is still printed by that rank."""

import pytest

from tests.conftest import ROOT
from tests.distributed.conftest import error_lines, torchrun


@pytest.mark.slow  # one torchrun start: about 30 s on 2 cores
def test_an_error_every_rank_raises_alike_is_printed_once(tmp_path):
    # input_dim 63 for 64 features: every rank's first forward fails the same way.
    overrides = ('{"model.input_dim": 63, "trainer.executor.replication_factor": 2, "trainer.executor.device": "cpu", '
                 '"trainer.num_epochs": 1}')
    done, _ = torchrun(["train", str(ROOT / "configs" / "digits_mlp.jsonnet"), "-s", str(tmp_path / "run"),
                        "-o", overrides])
    assert done.returncode != 0
    errors = error_lines(done)
    assert len(errors) == 1 and "[rank 0] RuntimeError: mat1 and mat2 shapes cannot be multiplied" in errors[0], errors
