"""Issue 11, defect 8: an `EpochCallback` given by its class path runs in a real training run."""

import json

import pytest

from ipuflow.commands.cli import run
from ipuflow.training import EpochCallback

from tests.experiment.conftest import tiny_config


class RecordingEpochCallback(EpochCallback):
    """Records the epochs it is called for, in a list shared by all instances."""

    epochs = []

    def __init__(self, serialization_dir: str, label: str = "seen") -> None:
        self.label = label

    def __call__(self, trainer, metrics, epoch, is_primary=True) -> None:
        RecordingEpochCallback.epochs.append((self.label, epoch))


@pytest.mark.slow  # a whole training run; tests/config/test_registrable.py has the quick check
def test_a_dotted_epoch_callback_is_built_and_called_by_the_trainer(tiny_data, tmp_path):
    path = f"{RecordingEpochCallback.__module__}.RecordingEpochCallback"
    config = tiny_config(tiny_data, num_epochs=2, epoch_callbacks=[{"type": path, "label": "dotted"}])
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    RecordingEpochCallback.epochs.clear()
    assert run(["train", str(config_file), "-s", str(tmp_path / "run")]) == 0
    assert RecordingEpochCallback.epochs == [("dotted", -1), ("dotted", 0), ("dotted", 1)]
