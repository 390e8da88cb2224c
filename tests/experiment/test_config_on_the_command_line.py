"""Config errors and edits as `ipuflow train` reports and applies them (checked with --dry-run)."""

import json

import pytest
import yaml

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


def dry_run(config_file, directory, *flags):
    return run(["train", str(config_file), "-s", str(directory), "--dry-run", *flags])


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"validation_data_loader": {"batch_size": 0}}, "validation_data_loader.batch_size: expected an int >= 1"),
        ({"validation_data_loader": {"batch_size": 2, "max_length": 0}}, "validation_data_loader.max_length:"),
        ({"validation_dataset_reader": {"type": "text_classification_json", "max_tokens": 0}},
         "validation_dataset_reader.max_tokens: expected an int >= 1 or null"),
        ({"validation_dataset_reader": {"max_instances": -1}}, "validation_dataset_reader.max_instances:"),
        ({"data_loader.batch_size": 0}, "data_loader.batch_size: expected an int >= 1"),
        ({"trainer.executor.device_iterations": 0}, "trainer.executor.device_iterations"),
    ],
)
def test_errors_in_validation_sections_name_the_validation_section(tiny_config_file, tmp_path, capsys, overrides, expected):
    assert dry_run(tiny_config_file, tmp_path / "run", "-o", json.dumps(overrides)) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert expected in error, error


def test_a_nested_override_merges_into_the_config(tiny_config_file, tmp_path, capsys):
    assert dry_run(tiny_config_file, tmp_path / "run", "-o", '{"trainer": {"num_epochs": 2}}') == 0
    report = json.loads(capsys.readouterr().out)
    # The other trainer keys survive: the optimizer is still adam with lr 0.1, the metric still +accuracy.
    assert report["optimizer"]["type"] == "adam" and report["optimizer"]["lr"] == 0.1
    assert report["validation_metric"] == "+accuracy"
    assert report["total_optimizer_updates"] == 2 * report["optimizer_updates_per_epoch"]


def test_several_overrides_apply_in_order(tiny_config_file, tmp_path, capsys):
    code = dry_run(tiny_config_file, tmp_path / "run", "-o", '{"trainer.num_epochs": 2}',
                   "-o", '{"trainer": {"optimizer": {"lr": 0.5}}}', "-o", '{"trainer.num_epochs": 3}')
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["optimizer"]["lr"] == 0.5
    assert report["total_optimizer_updates"] == 3 * report["optimizer_updates_per_epoch"]


def test_a_yaml_config_may_write_a_learning_rate_as_1e_3(tiny_data, tmp_path, capsys):
    text = yaml.safe_dump(tiny_config(tiny_data)).replace("lr: 0.1", "lr: 1e-3")
    assert "lr: 1e-3" in text
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert dry_run(path, tmp_path / "run") == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["optimizer"]["lr"] == 1e-3


def test_injected_arguments_are_not_listed_as_valid_keys(tiny_config_file, tmp_path, capsys):
    code = dry_run(tiny_config_file, tmp_path / "run", "-o", json.dumps({"trainer.executor.devise": "cpu"}))
    assert code == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "trainer.executor.devise: unknown key for NativeExecutor; did you mean 'device'?" in error
    valid = error.split("Valid keys:")[1]
    assert "training" not in valid and "device_iterations" in valid
