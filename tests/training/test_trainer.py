import json
import os
import signal
from pathlib import Path
from typing import Any, Dict, List

import pytest
import safetensors.torch
import torch

import ipuflow.execution.native  # noqa: F401  (registers the native executor)
import ipuflow.training  # noqa: F401
from ipuflow.config import ConfigurationError, Params
from ipuflow.training import (
    BatchCallback,
    EpochCallback,
    NonFiniteLossError,
    Trainer,
    TrainerCallback,
    TrainingInterrupted,
)
from tests.training.regression import LinearRegression, loaders


def build(serialization_dir, config: Dict[str, Any], seed: int = 0, dropout: float = 0.0, with_validation: bool = True,
          **loader_options):
    torch.manual_seed(seed)
    model = LinearRegression(dropout=dropout)
    train_loader, validation_loader = loaders(**loader_options)
    full = {"num_epochs": 2, "optimizer": {"type": "sgd", "lr": 0.05}, "enable_default_callbacks": False, **config}
    return Trainer.from_params(
        Params(full),
        model=model,
        serialization_dir=str(serialization_dir),
        data_loader=train_loader,
        validation_data_loader=validation_loader if with_validation else None,
    )


def read_metrics(directory: Path) -> Dict[str, Dict[str, Any]]:
    found = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("metrics_epoch_"):
            metrics = json.loads((directory / name).read_text())
            found[name] = {k: v for k, v in metrics.items() if not k.endswith("duration")}
    return found


class Recorder(TrainerCallback):
    """Records every event, with the learning rate at each training call."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.events: List[tuple] = []
        self.calls = 0

    def on_train_begin(self, event):
        self.events.append(("start",))

    def on_step_end(self, event):
        self.events.append(("batch", event.epoch, event.batch_number, event.is_training))

    def on_prediction_step(self, event):
        self.events.append(("batch", event.epoch, event.batch_number, event.is_training))

    def on_evaluate(self, event):
        self.events.append(("evaluate", event.epoch, event.state.global_step))

    def on_epoch_end(self, event):
        self.events.append(("epoch", event.epoch))

    def on_save(self, event):
        self.events.append(("save", event.paths[0].name))

    def on_log(self, event):
        self.events.append(("log", event.state.global_step, sorted(event.logs)))

    def on_train_end(self, event):
        self.events.append(("end", event.metrics is not None, event.epoch))

    def state_dict(self):
        return {"events": len(self.events)}


def test_metrics_files_best_weights_and_counters(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 3, "executor": {"type": "native", "output_mode": "all"}})
    metrics = trainer.train()
    files = read_metrics(tmp_path)
    assert list(files) == ["metrics_epoch_0.json", "metrics_epoch_1.json", "metrics_epoch_2.json"]
    last = json.loads((tmp_path / "metrics_epoch_2.json").read_text())
    for key in ("epoch", "training_duration", "training_loss", "training_mse", "validation_loss", "validation_mse",
                "best_epoch", "best_validation_loss", "host_calls", "optimizer_updates", "samples_seen"):
        assert key in last
    assert last["host_calls"] == 36 and last["optimizer_updates"] == 36 and last["samples_seen"] == 144
    assert metrics["epoch"] == 2
    # With SGD on a convex problem every epoch improves, so the best is the last epoch.
    assert last["best_epoch"] == 2 and last["best_validation_loss"] == last["validation_loss"]
    best = safetensors.torch.load_file(str(tmp_path / "best.safetensors"))
    assert torch.equal(best["linear.weight"], trainer.model.linear.weight.detach().cpu())
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("model_state")) == [
        "model_state_e2_b0.safetensors", "model_state_e3_b0.safetensors"]


def test_training_loss_is_the_mean_over_the_epoch(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 1, "optimizer": {"type": "sgd", "lr": 0.0}}, with_validation=False)
    trainer.train()
    # With lr 0 the weights never change, so the mean over calls is computable afterwards.
    device = trainer.model.linear.weight.device  # the executor's: the loader's batches are on the host
    losses = [float(trainer.model(**{key: value.to(device) for key, value in batch.items()})["loss"].detach())
              for batch in trainer.data_loader]
    recorded = json.loads((tmp_path / "metrics_epoch_0.json").read_text())["training_loss"]
    assert recorded == pytest.approx(sum(losses) / len(losses), rel=1e-5)


def test_the_model_ends_with_the_best_weights(tmp_path):
    # lr grows 10x per epoch, so training diverges after the first epoch and epoch 0 stays best.
    trainer = build(tmp_path, {"num_epochs": 3, "optimizer": {"type": "sgd", "lr": 0.05},
                               "learning_rate_scheduler": {"type": "exponential", "gamma": 12.0}, "patience": 5})
    metrics = trainer.train()
    assert metrics["best_epoch"] == 0
    best = safetensors.torch.load_file(str(tmp_path / "best.safetensors"))
    assert torch.equal(best["linear.weight"], trainer.model.linear.weight.detach().cpu())
    assert metrics["validation_loss"] > metrics["best_validation_loss"]


def test_early_stopping_with_patience(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 10, "patience": 1, "optimizer": {"type": "sgd", "lr": 0.05},
                               "learning_rate_scheduler": {"type": "exponential", "gamma": 12.0}})
    metrics = trainer.train()
    assert metrics["epoch"] == 1  # epoch 1 got worse; patience 1 stops after its files are written
    assert (tmp_path / "metrics_epoch_1.json").exists() and not (tmp_path / "metrics_epoch_2.json").exists()
    assert (tmp_path / "model_state_e2_b0.safetensors").exists()


def test_callback_order_and_on_end_after_errors(tmp_path):
    recorder = Recorder(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 2, "log_interval": 6}, train=16, validation=8)
    trainer.add_callback(recorder)
    trainer.train()
    events = [e for e in recorder.events if e[0] != "log"]
    expected = [("start",)]
    for epoch in range(2):
        expected += [("batch", epoch, b, True) for b in range(1, 5)]
        expected += [("batch", epoch, b, False) for b in range(1, 3)]
        expected += [("evaluate", epoch, 4 * (epoch + 1)), ("epoch", epoch), ("save", f"model_state_e{epoch + 1}_b0.safetensors")]
    expected += [("end", True, 1)]
    assert events == expected
    logs = [e for e in recorder.events if e[0] == "log"]
    assert logs == [("log", 6, ["batch_loss", "loss", "lr"])]


def test_batch_and_epoch_callbacks(tmp_path):
    calls = []

    @BatchCallback.register("test-recording-batches", exist_ok=True)
    class RecordingBatches(BatchCallback):
        def __init__(self, serialization_dir: str) -> None:
            self.serialization_dir = serialization_dir

        def __call__(self, trainer, batch, outputs, batch_metrics, epoch, batch_number, is_training, is_primary=True):
            calls.append(("batch", epoch, batch_number, is_training))

    @EpochCallback.register("test-recording-epochs", exist_ok=True)
    class RecordingEpochs(EpochCallback):
        def __call__(self, trainer, metrics, epoch, is_primary=True):
            calls.append(("epoch", epoch, "training_loss" in metrics))

    trainer = build(tmp_path, {"num_epochs": 1, "batch_callbacks": ["test-recording-batches"],
                               "epoch_callbacks": ["test-recording-epochs"]}, train=8, validation=4)
    trainer.train()
    assert calls == [("epoch", -1, False), ("batch", 0, 1, True), ("batch", 0, 2, True), ("batch", 0, 1, False),
                     ("epoch", 0, True)]


def test_step_schedules_count_optimizer_updates_with_device_iterations(tmp_path):
    lrs = []

    class LearningRates(TrainerCallback):
        def on_step_begin(self, event):
            lrs.append(event.trainer.executor.state_dict()["hyperparameters"][0]["lr"])

    trainer = build(tmp_path, {"num_epochs": 2, "optimizer": {"type": "sgd", "lr": 1.0},
                               "executor": {"type": "native", "device_iterations": 2},
                               "learning_rate_scheduler": {"type": "linear_with_warmup", "warmup_steps": 4}},
                    with_validation=False, train=24, batch_size=2)
    trainer.add_callback(LearningRates(str(tmp_path)))
    assert trainer.data_loader.combined_batch_size == 4 and len(trainer.data_loader) == 6
    # 12 updates per epoch, 24 in all; the lr in use for each call is that of its first update.
    trainer.train()
    assert trainer.optimizer_updates == 24
    expected = [min(u / 4, (24 - u) / 20) for u in range(1, 24, 2)]
    assert lrs == pytest.approx([max(v, 0.0) for v in expected])


def test_gradient_accumulation_spellings(tmp_path):
    trainer = build(tmp_path, {"num_gradient_accumulation_steps": 3}, train=24, batch_size=2, with_validation=False)
    assert trainer.executor.batch_size_factor == 3 and len(trainer.data_loader) == 4
    build(tmp_path / "same", {"num_gradient_accumulation_steps": 3, "executor": {"gradient_accumulation": 3}})
    with pytest.raises(ConfigurationError, match="num_gradient_accumulation_steps.*gradient_accumulation"):
        build(tmp_path / "conflict", {"num_gradient_accumulation_steps": 2, "executor": {"gradient_accumulation": 3}})


def test_no_grad_and_grad_norm(tmp_path):
    trainer = build(tmp_path, {"no_grad": ["bias"], "grad_norm": 0.5})
    assert not trainer.model.linear.bias.requires_grad
    assert trainer.executor.options.max_grad_norm == 0.5
    bias = trainer.model.linear.bias.detach().clone()
    trainer.train()
    assert torch.equal(trainer.model.linear.bias, bias)
    with pytest.raises(ConfigurationError, match="grad_norm"):
        build(tmp_path / "x", {"grad_norm": True})


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 3, "log_interval": 1,
                               "learning_rate_scheduler": {"type": "exponential", "gamma": 1e30}}, with_validation=False)
    with pytest.raises(NonFiniteLossError, match="model_state_e1_b0.safetensors"):
        trainer.train()
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("model_state")) == ["model_state_e1_b0.safetensors"]
    weights = safetensors.torch.load_file(str(tmp_path / "model_state_e1_b0.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())


def test_validation_interval_and_max_steps(tmp_path):
    recorder = Recorder(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 5, "validation_interval": 5, "max_steps": 14}, train=32, validation=8)
    trainer.add_callback(recorder)
    trainer.train()
    evaluations = [e for e in recorder.events if e[0] == "evaluate"]
    # The stop at max_steps validates too (issue 11.5), and writes that epoch's metrics so far.
    assert evaluations == [("evaluate", 0, 5), ("evaluate", 0, 8), ("evaluate", 1, 10), ("evaluate", 1, 14)]
    assert trainer.optimizer_updates == 14
    assert (tmp_path / "model_state_e1_b6.safetensors").exists()
    partial = json.loads((tmp_path / "metrics_epoch_1.json").read_text())
    assert partial["optimizer_updates"] == 14 and "validation_loss" in partial and "best_epoch" in partial
    assert trainer.run_status.stopped == "max_steps"


def test_sigint_saves_a_checkpoint_and_says_how_to_resume(tmp_path):
    class Interrupt(TrainerCallback):
        def on_step_end(self, event):
            if event.state.global_step == 3:
                os.kill(os.getpid(), signal.SIGINT)

    trainer = build(tmp_path, {"num_epochs": 2})
    trainer.add_callback(Interrupt(str(tmp_path)))
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingInterrupted, match="SIGINT.*-r"):
        trainer.train()
    assert signal.getsignal(signal.SIGINT) is previous
    assert (tmp_path / "model_state_e0_b3.safetensors").exists()


def test_tensorboard_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = build(tmp_path, {"num_epochs": 2, "log_interval": 4, "callbacks": ["tensorboard"],
                               "batch_callbacks": [{"type": "tensorboard-memory-usage", "interval": 2}]})
    trainer.train()
    train_events = EventAccumulator(str(tmp_path / "log" / "train")).Reload()
    tags = train_events.Tags()["scalars"]
    assert {"batch/loss", "batch/batch_loss", "batch/lr", "epoch/loss", "memory/cpu_rss_MB"} <= set(tags)
    assert [event.step for event in train_events.Scalars("epoch/loss")] == [0, 1]  # numbered as metrics.json
    validation_events = EventAccumulator(str(tmp_path / "log" / "validation")).Reload()
    assert "epoch/loss" in validation_events.Tags()["scalars"]


def test_default_callbacks_are_added_once(tmp_path):
    trainer = build(tmp_path, {"enable_default_callbacks": True, "callbacks": [{"type": "tensorboard"}]})
    names = [type(c).__name__ for c in trainer.callbacks]
    assert sorted(names) == ["ConsoleMetricsCallback", "ProgressCallback", "TensorBoardCallback"]


def _resume_config(max_steps=None, output_mode="final"):
    config = {
        "num_epochs": 3,
        "optimizer": {"type": "adam", "lr": 0.01},
        # Its own length (3 epochs × 12 updates): max_steps, which stands in for the interruption here,
        # is the horizon of a schedule whose length is derived (issue 23.4).
        "learning_rate_scheduler": {"type": "cosine_with_warmup", "warmup_steps": 5, "num_training_steps": 36},
        "moving_average": {"decay": 0.99},
        # With output mode "all" the model's training metrics accumulate too, and their state
        # travels in the checkpoint.
        "executor": {"type": "native", "output_mode": output_mode},
        "checkpointer": {"keep_most_recent_by_count": None},
        "callbacks": ["track_epoch", {"type": "early_stopping", "patience": 5}],
    }
    if max_steps is not None:
        config["max_steps"] = max_steps
    return config


@pytest.mark.parametrize("stop_after, output_mode", [(5, "final"), (12, "final"), (19, "final"), (5, "all")])
def test_resume_is_bitwise_equal_to_an_uninterrupted_run(tmp_path, stop_after, output_mode):
    # 12 updates per epoch: 5 and 19 stop mid-epoch, 12 at an epoch end.
    uninterrupted = tmp_path / "uninterrupted"
    build(uninterrupted, _resume_config(output_mode=output_mode), dropout=0.2).train()

    resumed = tmp_path / "resumed"
    first = build(resumed, _resume_config(max_steps=stop_after, output_mode=output_mode), dropout=0.2)
    first.train()
    assert first.optimizer_updates == stop_after
    # A fresh process would start from other RNG states: scramble them before resuming.
    torch.manual_seed(1234)
    second = build(resumed, _resume_config(output_mode=output_mode), seed=99, dropout=0.2)
    second.train()

    for name in ("model_state_e3_b0.safetensors", "best.safetensors"):
        a = safetensors.torch.load_file(str(uninterrupted / name))
        b = safetensors.torch.load_file(str(resumed / name))
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (name, key)
    assert read_metrics(uninterrupted) == read_metrics(resumed)
    if output_mode == "all":
        assert "training_mae" in read_metrics(resumed)["metrics_epoch_0.json"]


def test_best_weights_link_the_checkpoint_just_written_instead_of_writing_again(tmp_path):
    build(tmp_path, {"num_epochs": 2, "checkpointer": {"keep_most_recent_by_count": 1}}, with_validation=False).train()
    best, checkpoint = tmp_path / "best.safetensors", tmp_path / "model_state_e2_b0.safetensors"
    assert best.stat().st_ino == checkpoint.stat().st_ino
    assert not (tmp_path / "model_state_e1_b0.safetensors").exists()  # pruned; best is unaffected
    weights = safetensors.torch.load_file(str(best))
    assert weights.keys() == safetensors.torch.load_file(str(checkpoint)).keys()


def test_with_a_moving_average_best_weights_are_the_averages_not_a_link(tmp_path):
    build(tmp_path, {"num_epochs": 2, "moving_average": {"decay": 0.5}}, with_validation=False).train()
    best, checkpoint = tmp_path / "best.safetensors", tmp_path / "model_state_e2_b0.safetensors"
    assert best.stat().st_ino != checkpoint.stat().st_ino
    raw, averaged = safetensors.torch.load_file(str(checkpoint)), safetensors.torch.load_file(str(best))
    assert any(not torch.equal(raw[key], averaged[key]) for key in raw)
