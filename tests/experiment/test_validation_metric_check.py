"""A `trainer.validation_metric` that validation will not produce is refused before training starts,
with the closest of the model's metric names (issue 26.4)."""

import json

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


def test_a_validation_metric_typo_is_refused_before_training_with_a_suggestion(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1, validation_metric="+acuracy")
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 2
    captured = capsys.readouterr()
    message = " ".join(captured.err.split())
    assert "trainer.validation_metric:" in message and "'acuracy'" in message
    assert "did you mean 'accuracy'?" in message.lower() and "loss" in message
    assert "epoch 0" not in captured.err  # nothing was trained
    assert not run_dir.exists()  # and the rerun needs no --force


def test_the_metric_names_of_the_model_are_accepted(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1, validation_metric=["+f1_pos", "-loss"])
    config["model"]["metrics"] = {"f1": {"type": "f1", "average": "none"}}
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(config))
    assert run(["train", str(config_file), "-s", str(tmp_path / "run")]) == 0
