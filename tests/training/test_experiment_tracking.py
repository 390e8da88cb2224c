"""Issue 15: the `mlflow` and `wandb` callbacks log real runs (read back from MLflow's store and from
W&B's offline run files, no mocks), continue the same run on `-r`, and `report_to` adds them."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from ipuflow.commands.cli import run
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent

from tests.experiment.conftest import tiny_config, write_tiny_data
from tests.training.wandb_offline_records import offline_runs, read_offline_run


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("tiny_data"))


@pytest.fixture(autouse=True)
def _offline_trackers(monkeypatch, tmp_path):
    """No tracking server from the environment; W&B's own files (settings, cache) in the test's directory."""
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))


def _train(tmp_path: Path, config: Dict[str, Any], *extra: str) -> Path:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    directory = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(directory), *extra]) == 0
    return directory


@TrainerCallback.register("test_signal_at_update")
class SignalAtUpdate(TrainerCallback):
    """Sends this process `signal_name` once training reaches optimizer update `update` (as Ctrl-C would)."""

    def __init__(self, serialization_dir: str, update: int, signal_name: str = "SIGINT") -> None:
        super().__init__(serialization_dir)
        self.update, self.signal_name = update, signal_name

    def on_step_end(self, event: TrainerEvent) -> None:
        if event.state.global_step == self.update:
            os.kill(os.getpid(), getattr(signal, self.signal_name))


@TrainerCallback.register("test_raise_at_update")
class RaiseAtUpdate(TrainerCallback):
    """Raises once training reaches optimizer update `update` (a bug in a user's component)."""

    def __init__(self, serialization_dir: str, update: int) -> None:
        super().__init__(serialization_dir)
        self.update = update

    def on_step_end(self, event: TrainerEvent) -> None:
        if event.state.global_step == self.update:
            raise RuntimeError("a bug in a callback")


def _interrupted(tmp_path: Path, config: Dict[str, Any]) -> Path:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    directory = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(directory)]) != 0
    assert not (directory / "metrics.json").exists()
    return directory


def _wandb_run_files(directory: Path) -> List[Path]:
    """The offline run files, once W&B's service has written them (it writes asynchronously; its
    teardown, which ends every `ipuflow train` process, waits for that)."""
    import wandb

    wandb.teardown()
    return offline_runs(directory)


def _epoch_metrics(directory: Path) -> List[Dict[str, Any]]:
    paths = sorted(directory.glob("metrics_epoch_*.json"), key=lambda path: int(path.stem.rsplit("_", 1)[1]))
    return [json.loads(path.read_text()) for path in paths]


def _mlflow_history(directory: Path) -> Tuple[Any, Any, Dict[str, List[Tuple[int, float]]]]:
    from mlflow.tracking import MlflowClient

    record = json.loads((directory / "mlflow_run.json").read_text())
    client = MlflowClient(tracking_uri=record["tracking_uri"])
    logged = client.get_run(record["run_id"])
    history = {key: [(metric.step, metric.value) for metric in client.get_metric_history(record["run_id"], key)]
               for key in logged.data.metrics}
    return client, logged, history


# -- MLflow ----------------------------------------------------------------------------------------

@pytest.mark.slow  # two training runs
def test_mlflow_logs_the_config_metrics_and_archive_and_resume_continues_the_run(tiny_data, tmp_path):
    pytest.importorskip("mlflow")
    config = {**tiny_config(tiny_data, num_epochs=2), "report_to": ["tensorboard", "mlflow"]}
    directory = _train(tmp_path, config)

    # Stored under the serialization directory, not in the working directory.
    record = json.loads((directory / "mlflow_run.json").read_text())
    assert record["tracking_uri"] == f"sqlite:///{(directory / 'mlflow' / 'mlflow.db').resolve()}"
    client, logged, history = _mlflow_history(directory)
    assert logged.info.status == "FINISHED" and logged.info.run_name == "run"
    assert logged.data.params["trainer.num_epochs"] == "2"
    assert logged.data.params["trainer.optimizer.lr"] == "0.1"
    assert logged.data.params["report_to"] == "['tensorboard', 'mlflow']"
    epochs = _epoch_metrics(directory)
    assert history["validation/accuracy"] == [(12, pytest.approx(epochs[0]["validation_accuracy"])),
                                              (24, pytest.approx(epochs[1]["validation_accuracy"]))]
    assert [step for step, _ in history["train/loss"]] == [10, 20]
    assert [step for step, _ in history["epoch/training_loss"]] == [12, 24]
    final = json.loads((directory / "metrics.json").read_text())
    assert history["test/accuracy"] == [(24, pytest.approx(final["test_accuracy"]))]
    artifacts = client.list_artifacts(record["run_id"])
    assert [(artifact.path, artifact.file_size) for artifact in artifacts] == [
        ("model.tar.gz", (directory / "model.tar.gz").stat().st_size)]
    assert (directory / "log" / "train").is_dir()  # tensorboard, the other tracker named

    # `-r` with a raised limit continues the same run: its history goes on, nothing twice.
    config["trainer"]["num_epochs"] = 3
    _train(tmp_path, config, "-r")
    assert json.loads((directory / "mlflow_run.json").read_text())["run_id"] == record["run_id"]
    _, resumed, history = _mlflow_history(directory)
    assert resumed.info.status == "FINISHED"
    assert [step for step, _ in history["validation/accuracy"]] == [12, 24, 36]
    assert [step for step, _ in history["train/loss"]] == [10, 20, 30]
    assert [step for step, _ in history["test/accuracy"]] == [24, 36]
    assert len(client.search_runs([resumed.info.experiment_id])) == 1


@pytest.mark.slow  # two training runs
def test_an_interrupted_mlflow_run_is_killed_not_failed_and_resume_finishes_it(tiny_data, tmp_path):
    pytest.importorskip("mlflow")
    config = tiny_config(tiny_data, num_epochs=2, callbacks=["mlflow", {"type": "test_signal_at_update", "update": 5}])
    directory = _interrupted(tmp_path, config)
    _, logged, _ = _mlflow_history(directory)
    assert logged.info.status == "KILLED"  # MLflow's status for a run its user stopped; -r continues it

    _train(tmp_path, config, "-r")  # resumes after update 5: the signal is not sent again
    _, resumed, history = _mlflow_history(directory)
    assert resumed.info.run_id == logged.info.run_id and resumed.info.status == "FINISHED"
    assert [step for step, _ in history["validation/accuracy"]] == [12, 24]


def test_a_failed_mlflow_run_is_failed(tiny_data, tmp_path):
    pytest.importorskip("mlflow")
    config = tiny_config(tiny_data, num_epochs=2, callbacks=["mlflow", {"type": "test_raise_at_update", "update": 15}])
    directory = _interrupted(tmp_path, config)
    _, logged, _ = _mlflow_history(directory)
    assert logged.info.status == "FAILED"


@pytest.mark.slow  # creating MLflow's SQLite store takes seconds
def test_a_resumed_mlflow_run_does_not_log_replayed_steps_twice(tmp_path):
    pytest.importorskip("mlflow")
    from ipuflow.training.callbacks.tracking.mlflow_run import MlflowRun

    def tracked() -> MlflowRun:
        return MlflowRun(str(tmp_path), tracking_uri=None, experiment_name="ipuflow", run_name=None, tags={})

    first = tracked()
    first.open({"trainer": {"num_epochs": 2}})
    for step in range(1, 6):
        first.log_metrics({"train/loss": 1.0 / step}, step)
    first.close()
    # The process died after update 5; the checkpoint it resumes from is at update 3.
    second = tracked()
    second.open({"trainer": {"num_epochs": 2}})
    for step in range(4, 8):
        second.log_metrics({"train/loss": 1.0 / step, "train/lr": 0.1}, step)
    second.close()
    assert second.run_id == first.run_id
    _, logged, history = _mlflow_history(tmp_path)
    assert [step for step, _ in history["train/loss"]] == [1, 2, 3, 4, 5, 6, 7]
    assert [step for step, _ in history["train/lr"]] == [4, 5, 6, 7]
    assert logged.data.params == {"trainer.num_epochs": "2"}


# -- Weights & Biases ----------------------------------------------------------------------------

@pytest.mark.slow  # two training runs
def test_wandb_logs_offline_and_resume_continues_the_same_run(tiny_data, tmp_path):
    pytest.importorskip("wandb")
    config = tiny_config(tiny_data, num_epochs=2, callbacks=["wandb"])
    directory = _train(tmp_path, config)

    [run_file] = _wandb_run_files(directory)
    logged = read_offline_run(run_file)
    run_id = json.loads((directory / "wandb_run.json").read_text())["run_id"]
    assert logged["run_id"] == run_id and logged["exit_code"] == 0
    assert logged["config"]["trainer"]["num_epochs"] == 2
    assert logged["config"]["trainer"]["callbacks"] == ["wandb"]
    epochs = _epoch_metrics(directory)
    validation = [(row["_step"], row["validation/accuracy"]) for row in logged["history"] if "validation/accuracy" in row]
    assert validation == [(12, pytest.approx(epochs[0]["validation_accuracy"])),
                          (24, pytest.approx(epochs[1]["validation_accuracy"]))]
    assert [row["_step"] for row in logged["history"] if "train/loss" in row] == [10, 20]
    final = json.loads((directory / "metrics.json").read_text())
    assert [row["test/accuracy"] for row in logged["history"] if "test/accuracy" in row] == [
        pytest.approx(final["test_accuracy"])]
    assert logged["artifacts"] == [{"name": f"model-{run_id}", "type": "model", "files": ["model.tar.gz"]}]

    config["trainer"]["num_epochs"] = 3
    _train(tmp_path, config, "-r")
    first, second = _wandb_run_files(directory)
    resumed = read_offline_run(second)
    assert first == run_file and resumed["run_id"] == run_id and resumed["exit_code"] == 0
    assert [row["_step"] for row in resumed["history"] if "validation/accuracy" in row] == [36]
    assert [row["_step"] for row in resumed["history"] if "train/loss" in row] == [30]


@pytest.mark.parametrize("signal_name, exit_code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_wandb_run_ends_with_the_signal_s_exit_code(tiny_data, tmp_path, signal_name, exit_code):
    pytest.importorskip("wandb")
    config = tiny_config(tiny_data, num_epochs=2,
                         callbacks=["wandb", {"type": "test_signal_at_update", "update": 5, "signal_name": signal_name}])
    directory = _interrupted(tmp_path, config)
    [run_file] = _wandb_run_files(directory)
    assert read_offline_run(run_file)["exit_code"] == exit_code  # as a shell reports a process the signal ended


def test_an_unknown_wandb_mode_is_a_config_error(tmp_path):
    pytest.importorskip("wandb")
    from ipuflow.config import ConfigurationError
    from ipuflow.training.callbacks.tracking.callbacks import WandbCallback

    with pytest.raises(ConfigurationError, match="mode: expected 'offline', 'online' or 'disabled', found 'ofline'"):
        WandbCallback(str(tmp_path), mode="ofline")
