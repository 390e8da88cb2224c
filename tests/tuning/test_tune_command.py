"""`ipuflow tune` end to end on a tiny task: trials are ordinary runs, the study resumes, pruning stops
trials early without failing them, and results land in DIR."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ipuflow.commands.cli import run

from ipuflow.tuning.search_space import SearchSpec
from ipuflow.tuning.study import Search

from tests.conftest import ROOT
from tests.tuning.conftest import write_search

pytestmark = pytest.mark.slow


def tune(config, search, directory, *extra):
    return run(["tune", str(config), str(search), "-s", str(directory), *extra])


def load_study(directory):
    import optuna

    return optuna.load_study(study_name="ipuflow-tune", storage=f"sqlite:///{directory / 'study.db'}")


def test_a_search_trains_ordinary_runs_and_writes_the_results(tune_config_file, tmp_path, capsys):
    search = write_search(tmp_path / "search.json", n_trials=3)
    directory = tmp_path / "search"
    assert tune(tune_config_file, search, directory, "-o", '{"trainer.num_epochs": 2}') == 0
    out = capsys.readouterr().out
    assert "Best trial" in out and "trainer.optimizer.lr" in out
    trials = sorted(directory.glob("trial_*"))
    assert [path.name for path in trials] == ["trial_0000", "trial_0001", "trial_0002"]
    for path in trials:
        record = json.loads((path / "tune_trial.json").read_text())
        config = json.loads((path / "config.json").read_text())
        assert config["trainer"]["num_epochs"] == 2  # -o reaches every trial
        assert config["trainer"]["optimizer"]["lr"] == pytest.approx(record["params"]["trainer.optimizer.lr"])
        assert config["model"]["dropout"] == pytest.approx(record["params"]["model.dropout"])
        assert record["overrides"]["trainer.num_epochs"] == 2
        assert (path / "model.tar.gz").is_file() and (path / "metrics.json").is_file()
    rows = json.loads((directory / "trials.json").read_text())
    assert [row["state"] for row in rows] == ["COMPLETE"] * 3
    with open(directory / "trials.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 3
    best = json.loads((directory / "best_trial.json").read_text())
    values = [row["value"] for row in rows]
    assert best["value"] == max(values) and best["metric"] == "+accuracy"
    best_metrics = json.loads((directory / f"trial_{best['number']:04d}" / "metrics.json").read_text())
    assert best["value"] == pytest.approx(best_metrics["best_validation_accuracy"])
    # The best config trains as is and carries the sampled values, not the tuning callback.
    best_config = json.loads((directory / "best_config.json").read_text())
    assert best_config["trainer"]["optimizer"]["lr"] == pytest.approx(best["params"]["trainer.optimizer.lr"])
    assert "callbacks" not in best_config["trainer"]
    assert run(["train", str(directory / "best_config.json"), "-s", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["best_validation_accuracy"] == pytest.approx(best["value"])
    # A trial directory is an ordinary run: evaluate works on it.
    assert run(["evaluate", str(trials[0]), json.loads((trials[0] / "config.json").read_text())["validation_data_path"]]) == 0


def test_resume_keeps_finished_trials_and_a_non_empty_dir_needs_it(tune_config_file, tmp_path, capsys):
    search = write_search(tmp_path / "search.json", n_trials=2)
    directory = tmp_path / "search"
    assert tune(tune_config_file, search, directory, "-o", '{"trainer.num_epochs": 1}') == 0
    first = {path.name: (path / "metrics.json").stat().st_mtime_ns for path in directory.glob("trial_*")}
    assert tune(tune_config_file, search, directory, "-o", '{"trainer.num_epochs": 1}', "-n", "3") == 2
    assert "-r/--resume" in capsys.readouterr().err
    assert tune(tune_config_file, search, directory, "-o", '{"trainer.num_epochs": 1}', "-n", "3", "-r") == 0
    study = load_study(directory)
    assert [trial.state.name for trial in study.trials] == ["COMPLETE"] * 3
    for name, mtime in first.items():
        assert (directory / name / "metrics.json").stat().st_mtime_ns == mtime  # not trained again
    # Resuming with another search space is refused.
    other = write_search(tmp_path / "other.json", n_trials=2, pruner="median")
    assert tune(tune_config_file, other, directory, "-o", '{"trainer.num_epochs": 1}', "-r") == 2
    assert "different search" in capsys.readouterr().err


def test_pruned_trials_stop_early_and_are_marked_not_failed(tune_config_file, tmp_path):
    # The threshold pruner prunes every trial whose accuracy after the first epoch is below 1.01.
    search = write_search(tmp_path / "search.json", n_trials=2,
                          pruner={"type": "threshold", "lower": 1.01, "n_warmup_steps": 0})
    directory = tmp_path / "search"
    assert tune(tune_config_file, search, directory) == 0
    study = load_study(directory)
    assert [trial.state.name for trial in study.trials] == ["PRUNED", "PRUNED"]
    for trial in study.trials:
        metrics = json.loads((directory / f"trial_{trial.number:04d}" / "metrics.json").read_text())
        assert metrics["epoch"] == 0  # stopped after the first of 3 epochs, as a normal run would
        assert trial.user_attrs["pruned_at_step"] == 12
        assert (directory / f"trial_{trial.number:04d}" / "model.tar.gz").is_file()
    rows = json.loads((directory / "trials.json").read_text())
    assert all(row["state"] == "PRUNED" and row["value"] is not None for row in rows)
    assert not (directory / "best_config.json").exists()  # no complete trial


def test_a_killed_search_resumes_and_marks_the_interrupted_trial_failed(tune_config_file, tmp_path):
    search = write_search(tmp_path / "search.json", n_trials=2)
    directory = tmp_path / "search"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "ipuflow", "tune", str(tune_config_file), str(search), "-s", str(directory),
               "-o", '{"trainer.num_epochs": 200}']
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not list(directory.glob("trial_0000/model_state_*")) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert load_study(directory).trials[0].state.name == "RUNNING"
    # What `ipuflow tune -r` does first: the trial its dead process left running is marked failed,
    # so it does not count as finished and the search goes on with new trials.
    resumed = Search.prepare(tune_config_file, SearchSpec.from_file(search), directory,
                             overrides='{"trainer.num_epochs": 200}')
    resumed.open_study(resume=True)
    study = load_study(directory)
    assert study.trials[0].state.name == "FAIL"
    assert "interrupted" in study.trials[0].user_attrs["error"]
