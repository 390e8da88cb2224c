"""`max_steps` as the schedules' horizon, and training on with `-r` and raised limits (issues 23.4 and
26.1): say what will happen before doing it, change nothing on disk when nothing would train."""

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config
from tests.experiment.test_recovery import snapshot

LINEAR = {"type": "linear_with_warmup", "warmup_steps": 2}


def write_config(path, data_dir, **trainer):
    path.write_text(json.dumps(tiny_config(data_dir, **trainer)))
    return path


def latest_training_state(directory: Path):
    """The newest checkpoint's training state (loaded as the trainer loads it)."""
    def position(path):
        epochs, batches = re.search(r"_e(\d+)_b(\d+)\.pt$", path.name).groups()
        return int(epochs), int(batches)

    newest = max(directory.glob("training_state_e*_b*.pt"), key=position)
    return torch.load(newest, weights_only=True)


def next_lr(directory: Path) -> float:
    """The lr the newest checkpoint's optimizer holds (the one set for the next update)."""
    return latest_training_state(directory)["executor"]["optimizer"]["param_groups"][0]["lr"]


def scheduler_state(directory: Path):
    return latest_training_state(directory)["learning_rate_scheduler"]


def test_max_steps_is_the_horizon_of_step_based_schedules(tiny_data, tmp_path):
    config = write_config(tmp_path / "config.json", tiny_data, max_steps=5, num_epochs=6,
                          learning_rate_scheduler=LINEAR)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    state = scheduler_state(directory)
    assert state["total_steps"] == 5  # not num_epochs × updates per epoch (72)
    assert next_lr(directory) == 0.0  # the decay reached 0 when training stopped


def test_dry_run_total_updates_and_schedule_honour_max_steps(tiny_data, tmp_path, capsys):
    config = write_config(tmp_path / "config.json", tiny_data, max_steps=5, num_epochs=6,
                          learning_rate_scheduler=LINEAR)
    assert run(["train", str(config), "-s", str(tmp_path / "run"), "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["total_optimizer_updates"] == 5 and plan["max_steps"] == 5
    assert plan["learning_rate_schedule"]["lr_at_update"]["5"] == 0.0


@pytest.fixture(scope="module")
def stopped_early(tiny_data, tmp_path_factory):
    """A run that ran out of patience (patience 1) before its 10 epochs, with a linear schedule."""
    root = tmp_path_factory.mktemp("early")
    config = write_config(root / "config.json", tiny_data, patience=1, num_epochs=10, learning_rate_scheduler=LINEAR)
    directory = root / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["epoch"] < 9  # it stopped early
    return config, directory, metrics


def assert_unchanged_but_the_log(before, after):
    """Nothing of the run changed; out.log only gained the line saying why the command ended (issue 26.5)."""
    log_before, log_after = before.pop("out.log")[0], after.pop("out.log")[0]
    assert after == before
    assert log_after.startswith(log_before) and b"Run ended with an error" in log_after[len(log_before):]


@pytest.mark.slow
def test_raising_num_epochs_after_an_early_stop_is_refused_and_changes_nothing(stopped_early, tmp_path, capsys):
    config, original, _ = stopped_early
    directory = tmp_path / "copy"
    shutil.copytree(original, directory)
    before = snapshot(directory)
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 30}']) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "ran out of patience" in message and "trainer.patience" in message and "null" in message
    assert_unchanged_but_the_log(before, snapshot(directory))


@pytest.mark.slow
def test_raising_patience_with_num_epochs_trains_on_from_where_it_stopped(stopped_early, tmp_path, caplog):
    config, original, metrics = stopped_early
    directory = tmp_path / "copy"
    shutil.copytree(original, directory)
    with caplog.at_level("INFO"):
        assert run(["train", str(config), "-s", str(directory), "-r",
                    "-o", '{"trainer.num_epochs": 12, "trainer.patience": null}']) == 0
    assert "training continues from epoch" in caplog.text
    after = json.loads((directory / "metrics.json").read_text())
    assert after["epoch"] == 11 and after["optimizer_updates"] == 12 * 12
    assert json.loads((directory / "config.json").read_text())["trainer"]["patience"] is None
    # The linear schedule was stretched to the new length, so the epochs trained at a non-zero lr.
    assert scheduler_state(directory)["total_steps"] == 12 * 12
    assert "follows the changed limits" in caplog.text


@pytest.mark.slow
def test_a_lowered_patience_is_still_refused(stopped_early, tmp_path, capsys):
    config, original, _ = stopped_early
    directory = tmp_path / "copy"
    shutil.copytree(original, directory)
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.patience": 0}']) == 2
    assert "can only be raised" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow
def test_raising_num_epochs_stretches_an_ended_schedule_and_says_so(tiny_data, tmp_path, caplog):
    config = write_config(tmp_path / "config.json", tiny_data, num_epochs=2, learning_rate_scheduler=LINEAR)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    assert next_lr(directory) == 0.0  # the schedule ended with the run
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 3}']) == 0
    said = " ".join(caplog.text.split())
    assert "total_steps 24 → 36" in said and "optimizer update 25 uses lr" in said
    state = scheduler_state(directory)
    assert state["total_steps"] == 36 and state["last_update"] == 37


@pytest.mark.slow
def test_a_schedule_with_its_own_length_that_ended_is_named_as_lr_zero(tiny_data, tmp_path, caplog):
    schedule = {"type": "cosine_hard_restarts_with_warmup", "warmup_steps": 2, "num_training_steps": 24}
    config = write_config(tmp_path / "config.json", tiny_data, num_epochs=2, learning_rate_scheduler=schedule)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 3}']) == 0
    said = " ".join(caplog.text.split())
    assert "the learning rate is 0 from optimizer update 25 on" in said and "not stretched" in said


@pytest.mark.slow
def test_raising_num_epochs_when_max_steps_still_binds_names_max_steps(tiny_data, tmp_path, capsys):
    config = write_config(tmp_path / "config.json", tiny_data, num_epochs=2, max_steps=5)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    before = snapshot(directory)
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 3}']) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "raise trainer.max_steps above 5" in message
    assert_unchanged_but_the_log(before, snapshot(directory))


def readme_train_on_overrides() -> str:
    """The `-o` of README's "train on" example (a command over two lines)."""
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    match = re.search(r"-r \\\n\s*-o '([^']*)'\s*# train on", text)
    assert match, "README's train-on example is not where this test looks"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_train_on_example_trains_a_run_that_stopped_on_patience(stopped_early, tmp_path):
    config, original, metrics = stopped_early
    directory = tmp_path / "copy"
    shutil.copytree(original, directory)
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", readme_train_on_overrides()]) == 0
    after = json.loads((directory / "metrics.json").read_text())
    assert after["optimizer_updates"] > metrics["optimizer_updates"]
