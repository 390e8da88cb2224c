"""`trainer.executor.num_threads` caps torch's CPU threads (issue 26.10): on a shared machine the
default (one per core) can be several times slower than one thread while other jobs run."""

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.execution import NativeExecutor, StepExecutor


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def build(**config):
    return StepExecutor.from_params(Params({"type": "native", "device": "cpu", **config}, history="trainer.executor."),
                                    model=torch.nn.Linear(2, 2), training=False)


def test_num_threads_sets_torchs_intra_op_threads(restore_threads):
    torch.set_num_threads(2)
    executor = build(num_threads=1)
    assert isinstance(executor, NativeExecutor) and torch.get_num_threads() == 1


def test_null_num_threads_leaves_torchs_setting_alone(restore_threads):
    torch.set_num_threads(2)
    build(num_threads=None)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", "automatic"])
def test_a_bad_num_threads_names_its_key(value, restore_threads):
    with pytest.raises(ConfigurationError, match=r"^trainer\.executor\.num_threads: expected an int >= 1"):
        build(num_threads=value)
