"""Issue 15: Hugging Face `TrainerCallback`s run unchanged in ipuflow's trainer (the `huggingface`
callback type): transformers' own EarlyStoppingCallback and PrinterCallback, and a user's callback
from a package loaded with --include-package."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError
from ipuflow.config.import_policy import ArchiveImportPolicy

from tests.experiment.conftest import tiny_config, write_tiny_data

transformers = pytest.importorskip("transformers")

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("tiny_data"))


def _train(tmp_path: Path, config: dict, *extra: str, name: str = "run") -> Path:
    config_file = tmp_path / f"{name}.json"
    config_file.write_text(json.dumps(config))
    directory = tmp_path / name
    assert run(["train", str(config_file), "-s", str(directory), *extra]) == 0
    return directory


def _early_stopping(patience: int) -> dict:
    return {"type": "huggingface", "callback": "transformers.EarlyStoppingCallback",
            "args": {"early_stopping_patience": patience}}


def _validation_accuracies(directory: Path) -> List[float]:
    epochs = sorted(directory.glob("metrics_epoch_*.json"), key=lambda path: int(path.stem.rsplit("_", 1)[1]))
    return [json.loads(path.read_text())["validation_accuracy"] for path in epochs]


def _hf_stop_epoch(accuracies: List[float], patience: int) -> int:
    """The epoch after which Hugging Face's rule stops: `patience` evaluations in a row not strictly
    better than the best before them."""
    best, waited = None, 0
    for epoch, value in enumerate(accuracies):
        if best is None or value > best:
            best, waited = value, 0
        else:
            waited += 1
        if waited >= patience:
            return epoch
    raise AssertionError(f"the rule never stops on {accuracies}")


@pytest.mark.slow  # two training runs
def test_transformers_early_stopping_stops_an_ipuflow_run_and_resumes_its_count(tiny_data, tmp_path):
    config = tiny_config(tiny_data, num_epochs=12, callbacks=[_early_stopping(2)])
    directory = _train(tmp_path, config)
    accuracies = _validation_accuracies(directory)
    stopped_after = _hf_stop_epoch(accuracies, patience=2)
    metrics = json.loads((directory / "metrics.json").read_text())
    # It stopped the run (ipuflow's own patience is off): the last epoch is the one the rule names.
    assert len(accuracies) == stopped_after + 1 < 12
    assert metrics["epoch"] == stopped_after == 5

    # Its patience counter and the mirrored best metric travel in checkpoints: a run cut at an earlier
    # limit and resumed with the full one stops where the uninterrupted run did.
    short = _train(tmp_path, tiny_config(tiny_data, num_epochs=stopped_after, callbacks=[_early_stopping(2)]),
                   name="short")
    assert len(_validation_accuracies(short)) == stopped_after
    (tmp_path / "short.json").write_text(json.dumps(config))
    assert run(["train", str(tmp_path / "short.json"), "-s", str(short), "-r"]) == 0
    assert _validation_accuracies(short) == accuracies


@pytest.mark.slow  # a training run
def test_transformers_printer_callback_prints_training_and_evaluation_logs(tiny_data, tmp_path, capsys):
    printer = {"type": "huggingface", "callback": "PrinterCallback"}
    _train(tmp_path, tiny_config(tiny_data, num_epochs=1, log_interval=5, callbacks=[printer]))
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    logs = [eval(line) for line in printed]  # PrinterCallback prints dicts of formatted numbers
    training = [entry for entry in logs if "loss" in entry]
    evaluation = [entry for entry in logs if "eval_accuracy" in entry]
    assert [entry["epoch"] for entry in training] == ["0.4167", "0.8333"]  # updates 5 and 10 of 12
    assert set(training[0]) == {"loss", "batch_loss", "learning_rate", "epoch"}
    assert len(evaluation) == 1 and set(evaluation[0]) == {"eval_accuracy", "eval_loss", "epoch"}


@pytest.mark.slow  # a training run
def test_a_users_hugging_face_callback_sees_the_trainer_and_steers_it(tiny_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    callback = {"type": "huggingface", "callback": "recording_hf_callbacks.RecordingCallback",
                "args": {"log_at": 3, "evaluate_at": 7, "save_at": 5, "stop_at": 30}}
    config = tiny_config(tiny_data, num_epochs=6, callbacks=[callback])
    directory = _train(tmp_path, config, "--include-package", "recording_hf_callbacks")
    recorded = json.loads((directory / "hf_events.json").read_text())
    events, checks = recorded["events"], recorded["checks"]
    names = [event["event"] for event in events]

    assert names[:4] == ["on_init_end", "on_train_begin", "on_epoch_begin", "on_step_begin"]
    # The test set is scored after training: its batches, then on_predict.
    assert names[names.index("on_train_end"):] == ["on_train_end"] + ["on_prediction_step"] * 3 + ["on_predict"]
    assert checks["model_is_module"] and checks["optimizer_is_torch"]
    assert checks["has_train_dataloader"] and checks["has_eval_dataloader"]
    assert checks["args"] == {"output_dir": str(directory), "num_train_epochs": 6, "eval_strategy": "epoch",
                              "metric_for_best_model": "accuracy", "greater_is_better": True,
                              "per_device_train_batch_size": 4, "learning_rate": 0.1,
                              "device": "cuda" if torch.cuda.is_available() else "cpu",
                              "world_size": 1}
    # One step per host call here (12 per epoch), global_step counting optimizer updates.
    step_ends = [event["step"] for event in events if event["event"] == "on_step_end"]
    assert step_ends == list(range(1, 31))
    # should_log at update 3 (log_interval is 10); should_evaluate at 7; should_save at 5.
    assert [event["step"] for event in events if event["event"] == "on_log" and "loss" in event["logs"]] == [3, 10, 20, 30]
    assert [event["step"] for event in events if event["event"] == "on_evaluate"] == [7, 12, 24, 30]
    assert 5 in [event["step"] for event in events if event["event"] == "on_save"]
    # should_training_stop at update 30: the run ends there, mid-epoch 2.
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["optimizer_updates"] == 30 and metrics["epoch"] == 2
    evaluate = next(event for event in events if event["event"] == "on_evaluate")
    assert evaluate["metrics"] == ["epoch", "eval_accuracy", "eval_loss"]
    assert next(event for event in events if event["event"] == "on_predict")["metrics"] == ["test_accuracy", "test_loss"]
    assert checks["log_history_tail"][-1]["step"] == 30 and "eval_accuracy" in checks["log_history_tail"][-1]


class StepRecorder(transformers.TrainerCallback):
    """Records the optimizer updates (`state.global_step`) each step event sees."""

    def __init__(self):
        self.seen = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.seen.append(("begin", state.global_step))

    def on_step_end(self, args, state, control, **kwargs):
        self.seen.append(("end", state.global_step))


def test_step_events_fire_once_per_host_call_under_device_iterations(tmp_path):
    from tests.training.test_trainer import build

    callback = {"type": "huggingface", "callback": f"{__name__}.StepRecorder"}
    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": [callback],
                               "executor": {"type": "native", "device_iterations": 3}},
                    with_validation=False, train=24, batch_size=2)
    trainer.train()
    # 4 host calls of 3 updates each: the events see the updates before and after each call.
    assert trainer.callbacks[0].callback.seen == [(kind, step) for before in (0, 3, 6, 9)
                                                  for kind, step in (("begin", before), ("end", before + 3))]
    assert trainer.callbacks[0].training_arguments(trainer).max_steps == -1
    assert trainer.callbacks[0]._mirror.state.max_steps == 12


class EndFirstEpochEarly(transformers.TrainerCallback):
    """Ends the epoch after `after` updates (Hugging Face's should_epoch_stop), once."""

    def __init__(self, after: int):
        self.after = after

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.after:
            control.should_epoch_stop = True


def test_should_epoch_stop_ends_the_epoch_and_the_next_one_runs_whole(tmp_path):
    from tests.training.test_trainer import build

    callback = {"type": "huggingface", "callback": f"{__name__}.EndFirstEpochEarly", "args": {"after": 3}}
    trainer = build(tmp_path, {"num_epochs": 2, "callbacks": [callback]}, with_validation=False)
    assert len(trainer.data_loader) == 12
    trainer.train()
    assert trainer.optimizer_updates == 3 + 12
    assert json.loads((tmp_path / "metrics_epoch_0.json").read_text())["optimizer_updates"] == 3


def test_a_hugging_face_callbacks_refused_arguments_are_a_config_error(tmp_path):
    from tests.training.test_trainer import build

    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": [_early_stopping(1)]}, with_validation=False)
    with pytest.raises(ConfigurationError, match=r"EarlyStoppingCallback \(on_train_begin\) refused this run's "
                                                 r"TrainingArguments: EarlyStoppingCallback requires metric_for_best_model"):
        trainer.train()


def test_a_hugging_face_callback_with_wrong_arguments_is_a_config_error(tmp_path):
    from ipuflow.training.callbacks.huggingface.callback import HuggingFaceCallback

    with pytest.raises(ConfigurationError, match=r"args: transformers.EarlyStoppingCallback cannot be built"):
        HuggingFaceCallback(str(tmp_path), "transformers.EarlyStoppingCallback", {"patience": 2})
    with pytest.raises(ConfigurationError, match=r"training_args.metric_for_bst_model: not a field of "
                                                 r"transformers.TrainingArguments.*Did you mean 'metric_for_best_model'"):
        HuggingFaceCallback(str(tmp_path), "PrinterCallback", training_args={"metric_for_bst_model": "loss"})
    with pytest.raises(ConfigurationError, match=r"'transformers.TrainingArguments' names .* not a subclass of "
                                                 r"transformers.TrainerCallback"):
        HuggingFaceCallback(str(tmp_path), "transformers.TrainingArguments")


def test_an_archives_config_cannot_import_an_untrusted_callback_module(tmp_path):
    from ipuflow.training.callbacks.huggingface.callback import HuggingFaceCallback

    module = "untrusted_hf_callbacks_module"
    with ArchiveImportPolicy(source="the archive's config").applied():
        with pytest.raises(ConfigurationError, match=f"module {module!r}, which is not part of ipuflow"):
            HuggingFaceCallback(str(tmp_path), f"{module}.Callback")
    assert module not in sys.modules
