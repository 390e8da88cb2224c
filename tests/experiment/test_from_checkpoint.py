"""`ipuflow train -r --from-checkpoint PATH` (issue 23.7; IPUTrainer's `resume_from_checkpoint=PATH`):
resume from a chosen checkpoint; what the run wrote after it is moved aside, not lost."""

import json

from ipuflow.commands.cli import run
from tests.experiment.conftest import tiny_config
from tests.experiment.test_recovery import equal_weights


def test_resuming_from_an_earlier_checkpoint_retrains_to_the_same_weights_and_keeps_the_later_files(tiny_data, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(tiny_data, num_epochs=3, checkpointer={"keep_most_recent_by_count": None})))
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    original = (directory / "model_state_e3_b0.safetensors").read_bytes()
    chosen = directory / "model_state_e1_b0.safetensors"
    assert run(["train", str(config), "-s", str(directory), "-r", "--from-checkpoint", str(chosen)]) == 0
    superseded = directory / "superseded_1"
    assert (superseded / "model_state_e3_b0.safetensors").read_bytes() == original  # kept, not lost
    assert {"checkpoint_e2_b0.json", "metrics_epoch_1.json", "metrics.json", "model.tar.gz"} <= {
        path.name for path in superseded.iterdir()}
    # Epochs 1 and 2 ran again from the chosen checkpoint: on the CPU, the same weights as before.
    assert equal_weights(directory / "model_state_e3_b0.safetensors", superseded / "model_state_e3_b0.safetensors")
    assert json.loads((directory / "metrics.json").read_text())["epoch"] == 2


def test_a_from_checkpoint_that_is_not_one_of_the_run_names_its_checkpoints(trained_run, tiny_config_file, capsys):
    assert run(["train", str(tiny_config_file), "-s", str(trained_run), "-r", "--from-checkpoint", "e9_b0"]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "holds no checkpoint e9_b0" in message and "newest first: e6_b0" in message


def test_from_checkpoint_needs_recover(tiny_config_file, tmp_path, capsys):
    assert run(["train", str(tiny_config_file), "-s", str(tmp_path / "run"), "--from-checkpoint", "e1_b0"]) == 2
    assert "needs --recover" in capsys.readouterr().err
