import contextlib
import json
import os

import pytest
import torch

from ipuflow.config import Params
from ipuflow.training import Checkpointer, TrainerCheckpoint
from ipuflow.training.checkpoints.checkpointer import CheckpointsUnreadable
from ipuflow.training.loop.trainer import Trainer


class PositionOnlyTrainer(Trainer):
    """A Trainer whose checkpoint state is a position and a weight; GradientDescentTrainer checkpoints are tested in test_trainer.py."""

    def __init__(self) -> None:
        super().__init__(None)
        self.epochs, self.batches = 0, 0
        self.weight = torch.zeros(2, 2)

    @contextlib.contextmanager
    def get_checkpoint_state(self):
        yield TrainerCheckpoint(
            {"weight": self.weight, "tied": self.weight},
            {"epochs_completed": self.epochs, "batches_in_epoch_completed": self.batches, "step": torch.tensor(3)},
            (self.epochs, self.batches),
        )


def save_at(checkpointer, trainer, epochs, batches):
    trainer.epochs, trainer.batches = epochs, batches
    trainer.weight = torch.full((2, 2), float(epochs * 10 + batches))
    return checkpointer.save_checkpoint(trainer)


def test_files_named_by_position_and_retention_by_count(tmp_path):
    checkpointer = Checkpointer.from_params(Params({"keep_most_recent_by_count": 3}), serialization_dir=str(tmp_path))
    trainer = PositionOnlyTrainer()
    for epoch in range(1, 6):
        save_at(checkpointer, trainer, epoch, 0)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [f"model_state_e{e}_b0.safetensors" for e in (3, 4, 5)] + [f"training_state_e{e}_b0.pt" for e in (3, 4, 5)]
        + [f"checkpoint_e{e}_b0.json" for e in (3, 4, 5)]
    )
    loaded = checkpointer.load_checkpoint()
    assert torch.equal(loaded.model_state["weight"], torch.full((2, 2), 50.0))
    assert torch.equal(loaded.model_state["tied"], torch.full((2, 2), 50.0))
    assert loaded.training_state["epochs_completed"] == 5


def test_keep_zero_and_keep_all(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "zero"), keep_most_recent_by_count=0)
    save_at(checkpointer, PositionOnlyTrainer(), 1, 0)
    assert os.listdir(tmp_path / "zero") == []
    checkpointer = Checkpointer(str(tmp_path / "all"), keep_most_recent_by_count=None)
    trainer = PositionOnlyTrainer()
    for batches in range(1, 5):
        save_at(checkpointer, trainer, 0, batches)
    assert len(checkpointer.all_checkpoints()) == 4


def test_training_state_loads_with_weights_only(tmp_path):
    checkpointer = Checkpointer(str(tmp_path))
    _, training_path = save_at(checkpointer, PositionOnlyTrainer(), 2, 7)
    assert training_path.name == "training_state_e2_b7.pt"
    state = torch.load(training_path, weights_only=True)
    assert state["batches_in_epoch_completed"] == 7
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous(tmp_path, caplog):
    checkpointer = Checkpointer(str(tmp_path))
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 1, 0)
    model_path, _ = save_at(checkpointer, trainer, 1, 5)
    model_path.write_bytes(model_path.read_bytes()[:20])  # truncated
    loaded = checkpointer.load_checkpoint()
    assert loaded.training_state["batches_in_epoch_completed"] == 0
    assert "model_state_e1_b5.safetensors" in caplog.text


def test_interval_rules():
    checkpointer = Checkpointer("unused", save_completed_epochs=False, save_every_num_batches=3)
    assert not checkpointer.should_save(1, 0)
    assert not checkpointer.should_save(0, 2)
    assert checkpointer.should_save(0, 3)
    checkpointer = Checkpointer("unused", save_every_num_seconds=1e-9)
    assert checkpointer.should_save(0, 1)


def overwrite_bytes(path, offset_from_end=16, count=8):
    """Flip bytes inside a file without changing its size (what truncation checks cannot see)."""
    data = bytearray(path.read_bytes())
    for index in range(len(data) - offset_from_end, len(data) - offset_from_end + count):
        data[index] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("which", [0, 1])
def test_bytes_overwritten_inside_a_checkpoint_fall_back_with_a_warning_naming_the_file(tmp_path, caplog, which):
    checkpointer = Checkpointer(str(tmp_path))
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 1, 0)
    damaged = save_at(checkpointer, trainer, 1, 5)[which]
    overwrite_bytes(damaged)
    loaded = checkpointer.load_checkpoint()
    assert loaded.training_state["batches_in_epoch_completed"] == 0
    assert torch.equal(loaded.model_state["weight"], torch.full((2, 2), 10.0))
    assert damaged.name in caplog.text and "checksum" in caplog.text


def test_every_checkpoint_unreadable_is_an_error_naming_the_files_and_nothing_is_removed(tmp_path):
    checkpointer = Checkpointer(str(tmp_path))
    trainer = PositionOnlyTrainer()
    first = save_at(checkpointer, trainer, 1, 0)[0]
    second = save_at(checkpointer, trainer, 2, 0)[1]
    overwrite_bytes(first)
    second.write_bytes(second.read_bytes()[:30])
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(CheckpointsUnreadable) as error:
        checkpointer.load_checkpoint()
    message = str(error.value)
    assert first.name in message and second.name in message and "--force" in message
    assert sorted(os.listdir(tmp_path)) == before


def test_the_saved_interval_counters_are_those_of_the_save_itself(tmp_path):
    checkpointer = Checkpointer(str(tmp_path), save_every_num_batches=5, keep_most_recent_by_count=None)
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 6, 115)
    _, training_path = save_at(checkpointer, trainer, 6, 120)
    state = torch.load(training_path, weights_only=True)
    assert state["checkpointer"] == {"last_save_epoch": 6, "last_save_batches": 120}
    resumed = Checkpointer(str(tmp_path), save_every_num_batches=5)
    resumed.load_state_dict(state["checkpointer"])
    assert not resumed.should_save(6, 124) and resumed.should_save(6, 125)


def test_files_of_a_checkpoint_without_its_manifest_are_removed_and_never_loaded(tmp_path):
    checkpointer = Checkpointer(str(tmp_path), keep_most_recent_by_count=None)
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 1, 0)
    save_at(checkpointer, trainer, 1, 5)
    checkpointer.manifest_path(1, 5).unlink()  # what a kill between the files and the manifest leaves
    (tmp_path / "training_state_e1_b9.pt").write_bytes(b"half")  # a kill before the weights were written
    assert checkpointer.all_checkpoints() == [(1, 0)]
    assert sorted(checkpointer.remove_incomplete_checkpoints()) == [
        "model_state_e1_b5.safetensors", "training_state_e1_b5.pt", "training_state_e1_b9.pt"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_e1_b0.json", "model_state_e1_b0.safetensors",
                                            "training_state_e1_b0.pt"]


def test_the_run_status_is_recorded_with_the_newest_checkpoint(tmp_path):
    checkpointer = Checkpointer(str(tmp_path))
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 1, 0)
    model_path, training_path = save_at(checkpointer, trainer, 2, 0)
    files_before = model_path.read_bytes(), training_path.read_bytes()
    assert checkpointer.update_run_status({"stopped": "num_epochs", "archived": True})
    assert checkpointer.latest_run_status() == {"stopped": "num_epochs", "archived": True}
    assert checkpointer.load_checkpoint().run_status == {"stopped": "num_epochs", "archived": True}
    assert (model_path.read_bytes(), training_path.read_bytes()) == files_before
    manifest = json.loads(checkpointer.manifest_path(2, 0).read_text())
    assert set(manifest["sha256"]) == {model_path.name, training_path.name}


def test_damaged_checkpoints_hold_no_retention_slot_after_a_fallback(tmp_path):
    checkpointer = Checkpointer(str(tmp_path), keep_most_recent_by_count=2)
    trainer = PositionOnlyTrainer()
    save_at(checkpointer, trainer, 1, 0)
    damaged = save_at(checkpointer, trainer, 1, 9)[0]
    overwrite_bytes(damaged)
    resumed = Checkpointer(str(tmp_path), keep_most_recent_by_count=2)
    assert resumed.load_checkpoint().training_state["epochs_completed"] == 1  # e1_b0
    # The resumed run saves at other positions (e.g. time-based saves): its own newest two stay.
    save_at(resumed, trainer, 1, 3)
    save_at(resumed, trainer, 1, 6)
    assert resumed.all_checkpoints() == [(1, 9), (1, 6), (1, 3)]
    assert damaged.exists()
