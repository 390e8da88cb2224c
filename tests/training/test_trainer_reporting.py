"""What the trainer reports (TensorBoard, logs, metrics files) and how callbacks' requests are
answered: each test reproduces a defect of issue 11."""

from __future__ import annotations

import datetime
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import List

import pytest

from ipuflow.training import TrainerCallback, TrainingInterrupted
from tests.training.test_trainer import Recorder, build


def _scalars(directory: Path, tag: str) -> List[tuple]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory)).Reload()
    return [(event.step, event.value) for event in events.Scalars(tag)]


def test_the_logged_lr_is_the_one_the_call_used(tmp_path):
    # Warm-up makes the lr change on every call: a value one call ahead is visible.
    trainer = build(tmp_path, {"num_epochs": 1, "log_interval": 1, "callbacks": ["tensorboard"],
                               "optimizer": {"type": "sgd", "lr": 1.0},
                               "learning_rate_scheduler": {"type": "linear_with_warmup", "warmup_steps": 6}},
                    with_validation=False, train=24, batch_size=2)
    used: List[float] = []
    trainer.optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(opt.param_groups[0]["lr"]))
    trainer.train()
    logged = _scalars(tmp_path / "log" / "train", "batch/lr")
    assert [step for step, _ in logged] == list(range(1, 13))
    assert [value for _, value in logged] == pytest.approx(used)
    assert used[:3] == pytest.approx([1 / 6, 2 / 6, 3 / 6])


def _event_writer_threads() -> int:
    # Every open SummaryWriter keeps one of these threads until it is closed.
    return sum(type(thread).__name__ == "_AsyncWriterThread" for thread in threading.enumerate())


def test_memory_usage_callback_closes_its_writer(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 1, "batch_callbacks": [{"type": "tensorboard-memory-usage", "interval": 2}]},
                    with_validation=False)
    before = _event_writer_threads()
    trainer.train()
    assert list((tmp_path / "log" / "train").glob("*.memory"))
    assert _scalars(tmp_path / "log" / "train", "memory/cpu_rss_MB")
    assert _event_writer_threads() == before


class ValidateOnCall(TrainerCallback):
    """Asks for a validation after the given training host calls."""

    def __init__(self, serialization_dir: str, calls: List[int]) -> None:
        super().__init__(serialization_dir)
        self._calls = calls

    def on_step_end(self, event):
        if event.state.host_calls in self._calls:
            event.control.should_validate = True


def test_a_validation_request_on_the_last_call_of_an_epoch_is_answered_once(tmp_path):
    recorder = Recorder(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 2}, train=16, validation=8)  # 4 calls per epoch
    trainer.add_callback(ValidateOnCall(str(tmp_path), [2, 4]))
    trainer.add_callback(recorder)
    trainer.train()
    evaluations = [event for event in recorder.events if event[0] == "evaluate"]
    # Call 2 asks for one within epoch 0; call 4 is answered by the end-of-epoch validation.
    assert evaluations == [("evaluate", 0, 2), ("evaluate", 0, 4), ("evaluate", 1, 8)]


def test_the_early_stopping_callback_says_why_it_stops(tmp_path, caplog):
    trainer = build(tmp_path, {"num_epochs": 10, "optimizer": {"type": "sgd", "lr": 0.05},
                               "learning_rate_scheduler": {"type": "exponential", "gamma": 12.0},
                               "callbacks": [{"type": "early_stopping", "patience": 1}]})
    with caplog.at_level(logging.INFO):
        metrics = trainer.train()
    assert metrics["epoch"] == 1
    messages = [record.getMessage() for record in caplog.records if "early_stopping" in record.name]
    assert len(messages) == 1
    assert "-loss" in messages[0] and "1 validation" in messages[0] and "stopping" in messages[0]


def _seconds(text: str) -> float:
    hours, minutes, seconds = text.split(":")
    return datetime.timedelta(hours=int(hours), minutes=int(minutes), seconds=float(seconds)).total_seconds()


class SlowThenInterrupt(TrainerCallback):
    """Spends time in every call of the first process, then sends it SIGTERM."""

    def on_step_end(self, event):
        if event.is_training:
            time.sleep(0.1)
            if event.state.host_calls == 6:
                os.kill(os.getpid(), signal.SIGTERM)


def test_training_duration_accumulates_across_resumes(tmp_path):
    first = build(tmp_path, {"num_epochs": 1})
    first.add_callback(SlowThenInterrupt(str(tmp_path)))
    start = time.monotonic()
    with pytest.raises(TrainingInterrupted):
        first.train()
    first_process = time.monotonic() - start
    assert first_process >= 0.6
    second_start = time.monotonic()
    build(tmp_path, {"num_epochs": 1}).train()
    second_process = time.monotonic() - second_start
    duration = _seconds(json.loads((tmp_path / "metrics_epoch_0.json").read_text())["training_duration"])
    assert duration >= 0.6
    assert duration <= first_process + second_process + 0.05


def test_training_metrics_that_need_output_mode_all_are_explained_once(tmp_path, caplog):
    from ipuflow.metrics import CategoricalAccuracy  # noqa: F401  (a model with a metric: LinearRegression's mae)

    trainer = build(tmp_path, {"num_epochs": 2, "enable_default_callbacks": True})
    with caplog.at_level(logging.INFO):
        trainer.train()
    notes = [r.getMessage() for r in caplog.records if "shown as N/A" in r.getMessage()]
    assert len(notes) == 1
    assert '"all"' in notes[0] and "mae" in notes[0] and "N/A" in notes[0]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        build(tmp_path / "all", {"num_epochs": 1, "enable_default_callbacks": True,
                                 "executor": {"type": "native", "output_mode": "all"}}).train()
    assert not [r for r in caplog.records if "shown as N/A" in r.getMessage()]


def test_log_interval_counts_optimizer_updates_like_validation_interval(tmp_path):
    recorder = Recorder(str(tmp_path))
    # 2 updates per host call, 8 calls (16 updates) per epoch.
    trainer = build(tmp_path, {"num_epochs": 1, "log_interval": 4, "validation_interval": 4,
                               "executor": {"type": "native", "device_iterations": 2}},
                    train=32, validation=8, batch_size=2)
    trainer.add_callback(recorder)
    trainer.train()
    assert [event[1] for event in recorder.events if event[0] == "log"] == [4, 8, 12, 16]
    assert [event[2] for event in recorder.events if event[0] == "evaluate"] == [4, 8, 12, 16]


def test_file_friendly_progress_writes_whole_lines_and_each_final_bar_once(tmp_path, capsys, monkeypatch):
    from ipuflow.training.callbacks.progress import FILE_FRIENDLY_ENVIRONMENT_VARIABLE

    monkeypatch.setenv(FILE_FRIENDLY_ENVIRONMENT_VARIABLE, "1")  # what --file-friendly-logging sets
    # A redraw on every call (interval 0) makes the last update draw the final bar too.
    build(tmp_path, {"num_epochs": 2, "callbacks": [{"type": "progress", "file_friendly_interval": 0}]},
          train=16, validation=8).train()
    written = capsys.readouterr().err
    assert "\r" not in written
    lines = written.splitlines()
    assert all(line.strip() for line in lines), "no blank lines"
    for epoch in range(2):
        for part, total in (("training", 4), ("validation", 2)):
            finals = [line for line in lines if line.startswith(f"epoch {epoch} {part}: 100%|") and f"{total}/{total}" in line]
            assert len(finals) == 1, (epoch, part, lines)
    assert "loss:" in [line for line in lines if line.startswith("epoch 1 validation: 100%")][0]
