"""A resumed trainer knows what state the run is in (issue 17.1, 17.2): a stopped run stays
stopped, and the best weights are repaired after a crash between a checkpoint and writing them."""

import os

import pytest
import safetensors.torch
import torch

import ipuflow.training.checkpoints.best_weights as best_weights_module
from ipuflow.training.checkpoints.best_weights import BestWeights

from tests.training.test_trainer import build, read_metrics


class SimulatedCrash(BaseException):
    """Stands for the process dying at this point: nothing after it runs, no handler catches it."""


def files(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))
            if (directory / name).is_file()}


@pytest.mark.parametrize("stopper", [{"patience": 1}, {"callbacks": [{"type": "early_stopping", "patience": 1}]}])
def test_an_early_stopped_run_resumes_as_stopped(tmp_path, stopper):
    config = {"num_epochs": 10, "optimizer": {"type": "sgd", "lr": 0.05},
              "learning_rate_scheduler": {"type": "exponential", "gamma": 12.0}, **stopper}
    first = build(tmp_path, config)
    metrics = first.train()
    assert metrics["epoch"] == 1
    before = files(tmp_path)
    second = build(tmp_path, config, seed=5)
    assert second.train() == metrics
    assert second.epochs_completed == 2
    assert files(tmp_path) == before  # no epoch 2, no new checkpoint, same best weights
    assert second.run_status.stopped in ("early_stopping", "callback")
    best = safetensors.torch.load_file(str(tmp_path / "best.safetensors"))
    assert torch.equal(best["linear.weight"], second.model.linear.weight.detach())


@pytest.mark.parametrize("moving_average", [False, True])
def test_a_crash_between_the_last_checkpoint_and_the_best_weights_is_repaired_on_resume(
        tmp_path, monkeypatch, moving_average):
    config = {"num_epochs": 2, "checkpointer": {"keep_most_recent_by_count": None}}
    if moving_average:
        config["moving_average"] = {"decay": 0.5}
    uninterrupted = tmp_path / "uninterrupted"
    build(uninterrupted, config).train()

    crashed = tmp_path / "crashed"
    trainer = build(crashed, config)
    calls = []
    if moving_average:
        original = BestWeights._save

        def crash_on_the_second(self):
            calls.append(1)
            if len(calls) == 2:
                raise SimulatedCrash
            original(self)

        monkeypatch.setattr(BestWeights, "_save", crash_on_the_second)
    else:
        original_link = best_weights_module.link_atomically

        def crash_on_the_second(source, path):
            calls.append(1)
            if len(calls) == 2:
                raise SimulatedCrash
            original_link(source, path)

        monkeypatch.setattr(best_weights_module, "link_atomically", crash_on_the_second)
    with pytest.raises(SimulatedCrash):
        trainer.train()
    monkeypatch.undo()
    # The last checkpoint is on disk; best.safetensors still holds epoch 0's weights.
    assert (crashed / "checkpoint_e2_b0.json").exists()
    stale = safetensors.torch.load_file(str(crashed / "best.safetensors"))
    best = safetensors.torch.load_file(str(uninterrupted / "best.safetensors"))
    assert not torch.equal(stale["linear.weight"], best["linear.weight"])

    resumed = build(crashed, config, seed=7)
    resumed.train()
    repaired = safetensors.torch.load_file(str(crashed / "best.safetensors"))
    assert all(torch.equal(repaired[key], best[key]) for key in best)
    assert torch.equal(resumed.model.linear.weight.detach(), best["linear.weight"])
    assert read_metrics(crashed) == read_metrics(uninterrupted)


def test_a_damaged_best_weights_file_that_cannot_be_rebuilt_stops_the_run(tmp_path):
    config = {"num_epochs": 3, "optimizer": {"type": "sgd", "lr": 0.05},
              "learning_rate_scheduler": {"type": "exponential", "gamma": 12.0}, "patience": 5}
    build(tmp_path, config).train()  # epoch 0 stays the best; the last checkpoint is e3_b0
    best = tmp_path / "best.safetensors"
    data = bytearray(best.read_bytes())
    data[-4] ^= 0xFF
    best.unlink()  # a hard link to an old checkpoint: write a new file, leave that checkpoint alone
    best.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="best.safetensors does not hold the best weights"):
        build(tmp_path, config).train()


def test_a_max_steps_stop_without_validation_keeps_the_final_weights_as_the_best_and_stays_stopped(tmp_path):
    config = {"num_epochs": 3, "max_steps": 5}
    trainer = build(tmp_path, config, with_validation=False)
    metrics = trainer.train()  # 12 host calls per epoch: the stop comes mid-epoch 0
    assert metrics["epoch"] == 0 and metrics["optimizer_updates"] == 5 and metrics["best_epoch"] == 0
    best = safetensors.torch.load_file(str(tmp_path / "best.safetensors"))
    assert torch.equal(best["linear.weight"], trainer.model.linear.weight.detach().cpu())
    assert trainer.run_status.stopped == "max_steps"
    before = files(tmp_path)
    again = build(tmp_path, config, with_validation=False, seed=3)
    assert again.train() == metrics and again.optimizer_updates == 5
    assert files(tmp_path) == before
    raised = build(tmp_path, {**config, "max_steps": 30}, with_validation=False, seed=3)
    assert raised.train()["optimizer_updates"] == 30 and raised.run_status.stopped == "max_steps"


def test_the_save_cadence_survives_a_crash_and_resume(tmp_path):
    from ipuflow.training import TrainerCallback

    config = {"num_epochs": 1, "checkpointer": {"save_every_num_batches": 5, "keep_most_recent_by_count": None}}
    uninterrupted = tmp_path / "uninterrupted"
    build(uninterrupted, config).train()

    class CrashAtCall8(TrainerCallback):
        def on_step_end(self, event):
            if event.batch_number == 8:
                raise SimulatedCrash

    crashed = tmp_path / "crashed"
    trainer = build(crashed, config)
    trainer.add_callback(CrashAtCall8(str(crashed)))
    with pytest.raises(SimulatedCrash):
        trainer.train()
    build(crashed, config).train()  # resumes from e0_b5
    checkpoints = sorted(name for name in os.listdir(uninterrupted) if name.startswith("model_state_"))
    assert checkpoints == ["model_state_e0_b10.safetensors", "model_state_e0_b5.safetensors",
                           "model_state_e1_b0.safetensors"]
    assert sorted(name for name in os.listdir(crashed) if name.startswith("model_state_")) == checkpoints


def test_a_signal_as_training_ends_is_reported_and_the_run_resumes_as_finished(tmp_path):
    import signal

    from ipuflow.training import TrainerCallback, TrainingInterrupted

    class SignalAtTheLastEpoch(TrainerCallback):
        def on_epoch_end(self, event):
            if event.epoch == 1:
                os.kill(os.getpid(), signal.SIGTERM)

    config = {"num_epochs": 2}
    trainer = build(tmp_path, config)
    trainer.add_callback(SignalAtTheLastEpoch(str(tmp_path)))
    with pytest.raises(TrainingInterrupted, match="SIGTERM arrived as training ended.*without training"):
        trainer.train()
    before = files(tmp_path)
    resumed = build(tmp_path, config)
    assert resumed.train()["epoch"] == 1 and resumed.run_status.stopped == "num_epochs"
    assert files(tmp_path) == before


def test_best_weights_linked_to_a_checkpoint_take_its_recorded_checksum_unread(tmp_path, monkeypatch):
    # The best weights are a hard link to the checkpoint just written: the checksum the checkpoint's
    # manifest records is theirs, so the file is not hashed a second time (a pass over the weights),
    # nor read back at the end, when the last epoch was the best: the model holds those weights.
    hashed = []
    original = best_weights_module.file_sha256

    def counting(path):
        hashed.append(os.path.basename(path))
        return original(path)

    monkeypatch.setattr(best_weights_module, "file_sha256", counting)
    trainer = build(tmp_path, {"num_epochs": 2, "checkpointer": {"keep_most_recent_by_count": None}})
    trainer.train()
    assert hashed == []
    assert trainer.state.best_position == [2, 0]
    assert trainer.get_best_weights_sha256() == trainer.state.best_sha256 == original(tmp_path / "best.safetensors")
    assert os.path.samefile(tmp_path / "best.safetensors", trainer.state.best_model_checkpoint)
