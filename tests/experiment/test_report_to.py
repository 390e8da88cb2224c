"""Issue 15: the top-level `report_to` shortcut names experiment trackers and adds their callbacks."""

import json

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


def _dry_run(tmp_path, config, capsys):
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    code = run(["train", str(config_file), "-s", str(tmp_path / "run"), "--dry-run"])
    done = capsys.readouterr()
    return code, done


def test_report_to_adds_the_trackers_callbacks(tiny_data, tmp_path, capsys):
    config = {**tiny_config(tiny_data, num_epochs=1), "report_to": ["tensorboard", "mlflow", "wandb"]}
    code, done = _dry_run(tmp_path, config, capsys)
    assert code == 0, done.err
    callbacks = json.loads(done.out)["callbacks"]
    assert [callbacks.count(name) for name in ("tensorboard", "mlflow", "wandb")] == [1, 1, 1]


def test_a_tracker_configured_in_trainer_callbacks_keeps_its_settings_and_is_not_added_twice(tiny_data, tmp_path,
                                                                                               capsys):
    configured = {"type": "mlflow", "experiment_name": "mine"}
    config = {**tiny_config(tiny_data, num_epochs=1, callbacks=[configured]), "report_to": "mlflow"}
    code, done = _dry_run(tmp_path, config, capsys)
    assert code == 0, done.err
    assert json.loads(done.out)["callbacks"].count("mlflow") == 1


def test_an_unknown_tracker_is_a_config_error_naming_report_to(tiny_data, tmp_path, capsys):
    config = {**tiny_config(tiny_data, num_epochs=1), "report_to": ["tensorboard", "mlfow"]}
    code, done = _dry_run(tmp_path, config, capsys)
    assert code == 2
    message = " ".join(done.err.split())
    assert "report_to.1: 'mlfow' is not a tracker ipuflow reports to. Did you mean 'mlflow'?" in message
    assert "Trackers: tensorboard, wandb, mlflow" in message
    assert "Traceback" not in done.err
