"""Issue 15: one event dispatch with one event object, the `TrainerState` (written as
trainer_state.json, in every checkpoint, restored on resume) and the new control requests."""

import json
import os
import signal

import pytest
import safetensors.torch
import torch

from ipuflow.config import ConfigurationError
from ipuflow.training import TrainerCallback, TrainingInterrupted
from ipuflow.training.events import EVENTS
from ipuflow.training.state.trainer_state import TrainerState
from tests.training.test_trainer import build


class EveryEvent(TrainerCallback):
    """Records (event, global_step, epoch, batch_number, split) for every event, plus what the
    payload holds where it matters."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.events = []
        self.step_end_logs = []
        self.float_epochs = []
        self.end = None


def _record(name):
    def record(self, event):
        assert event.name == name and event.trainer is self.trainer and event.state is self.trainer.state
        assert event.control is self.trainer.control
        self.events.append((name, event.state.global_step, event.epoch, event.batch_number, event.split))
        if name == "on_step_end":
            self.step_end_logs.append(event.logs is not None)
            self.float_epochs.append(event.state.epoch)
        if name == "on_train_end":
            self.end = event
    return record


for _name in EVENTS:
    setattr(EveryEvent, _name, _record(_name))


def test_every_event_fires_in_order_with_exact_counts_under_device_iterations(tmp_path):
    recorder = EveryEvent(str(tmp_path))
    # 2 updates per host call, 8 calls (16 updates) per epoch; logs when the updates reach a multiple of 6.
    trainer = build(tmp_path, {"num_epochs": 2, "log_interval": 6, "callbacks": [],
                               "executor": {"type": "native", "device_iterations": 2}},
                    train=32, validation=8, batch_size=2)
    trainer.add_callback(recorder)
    validation_batches = len(trainer.validation_data_loader)
    metrics = trainer.train()

    expected = [("on_train_begin", 0, None, None, "train")]
    for epoch in range(2):
        expected.append(("on_epoch_begin", 16 * epoch, epoch, None, "train"))
        for call in range(1, 9):
            before = 16 * epoch + 2 * (call - 1)
            expected.append(("on_step_begin", before, epoch, call, "train"))
            for update in range(2):  # inside the call: the updates made so far
                expected.append(("on_pre_optimizer_step", before + update, epoch, call, "train"))
                expected.append(("on_optimizer_step", before + update, epoch, call, "train"))
            expected.append(("on_step_end", before + 2, epoch, call, "train"))
            if (before + 2) % 6 == 0:
                expected.append(("on_log", before + 2, epoch, call, "train"))
        end = 16 * (epoch + 1)
        expected += [("on_prediction_step", end, epoch, batch, "validation") for batch in range(1, validation_batches + 1)]
        expected += [("on_evaluate", end, epoch, None, "validation"), ("on_epoch_end", end, epoch, None, "train"),
                     ("on_save", end, None, None, "train")]
    expected.append(("on_train_end", 32, 1, None, "train"))
    assert recorder.events == expected  # on_init_end fired before the recorder was added

    # logs at the logging points, and after each epoch's first call (calls 1 and 9) for the progress bar
    assert recorder.step_end_logs == [(2 * call) % 6 == 0 or call in (1, 9) for call in range(1, 17)]
    assert recorder.float_epochs == pytest.approx([call / 8 for call in range(1, 17)])
    assert recorder.end.metrics == metrics and recorder.end.error is None
    state = trainer.state
    assert (state.global_step, state.host_calls, state.samples_seen, state.epochs_completed) == (32, 16, 64, 2)
    assert state.epoch == 2.0 and state.max_steps == 32 and state.num_train_epochs == 2
    assert [entry["step"] for entry in state.log_history] == [6, 12, 16, 18, 24, 30, 32]
    assert "validation_loss" in state.log_history[2] and "lr" in state.log_history[0]


def test_on_init_end_fires_once_for_configured_callbacks(tmp_path):
    TrainerCallback.register("test-every-event", exist_ok=True)(EveryEvent)
    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": ["test-every-event"]}, train=8, validation=4)
    recorder = trainer.callbacks[0]
    assert recorder.events == [("on_init_end", 0, None, None, "train")]


def test_on_train_end_fires_after_an_error_with_the_error(tmp_path):
    class FailAtCall2(EveryEvent):
        def on_step_end(self, event):
            if event.batch_number == 2:
                raise ValueError("callback failure")

    recorder = FailAtCall2(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 1}, train=16)
    trainer.add_callback(recorder)
    with pytest.raises(ValueError, match="callback failure"):
        trainer.train()
    assert recorder.events[-1][0] == "on_train_end"
    assert isinstance(recorder.end.error, ValueError) and recorder.end.metrics is None


def test_trainer_state_json_is_written_with_every_checkpoint_and_at_the_end(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 2, "log_interval": 4,
                               "checkpointer": {"keep_most_recent_by_count": None}}, train=16, validation=8)
    trainer.train()
    written = json.loads((tmp_path / "trainer_state.json").read_text())
    assert written == trainer.state.to_dict()
    assert TrainerState.load(tmp_path / "trainer_state.json") == trainer.state
    assert written["global_step"] == 8 and written["best_epoch"] == 1
    assert written["best_model_checkpoint"] == str(tmp_path / "best.safetensors")
    assert written["best_metric"] == pytest.approx(json.loads((tmp_path / "metrics_epoch_1.json").read_text())
                                                   ["best_validation_loss"])
    first = torch.load(tmp_path / "training_state_e1_b0.pt", weights_only=True)
    assert first["version"] == 2
    assert first["trainer_state"]["global_step"] == 4 and first["trainer_state"]["epochs_completed"] == 1
    assert len(first["trainer_state"]["log_history"]) == 2  # the log at update 4 and epoch 0's validation


def test_an_interrupted_and_resumed_run_ends_with_the_uninterrupted_state_and_weights(tmp_path):
    config = {"num_epochs": 2, "log_interval": 3, "optimizer": {"type": "adam", "lr": 0.01},
              "learning_rate_scheduler": {"type": "linear_with_warmup", "warmup_steps": 5},
              "callbacks": [{"type": "early_stopping", "patience": 5}]}
    uninterrupted = tmp_path / "uninterrupted"
    build(uninterrupted, config, dropout=0.2).train()

    class Interrupt(TrainerCallback):
        def on_step_end(self, event):
            if event.state.global_step == 7:
                os.kill(os.getpid(), signal.SIGINT)

    resumed = tmp_path / "resumed"
    first = build(resumed, config, dropout=0.2)
    first.add_callback(Interrupt(str(resumed)))
    with pytest.raises(TrainingInterrupted):
        first.train()
    assert json.loads((resumed / "trainer_state.json").read_text())["global_step"] == 7
    torch.manual_seed(1234)
    second = build(resumed, config, seed=99, dropout=0.2)
    second.train()

    def state(directory):
        values = json.loads((directory / "trainer_state.json").read_text())
        del values["training_seconds"]
        values["best_model_checkpoint"] = os.path.basename(values["best_model_checkpoint"])
        return values

    assert state(resumed) == state(uninterrupted)
    for name in ("model_state_e2_b0.safetensors", "best.safetensors"):
        a = safetensors.torch.load_file(str(uninterrupted / name))
        b = safetensors.torch.load_file(str(resumed / name))
        assert all(torch.equal(a[key], b[key]) for key in a)


def test_a_checkpoint_of_the_old_training_state_layout_is_refused_clearly(tmp_path):
    build(tmp_path, {"num_epochs": 1}, with_validation=False).train()
    training_path = tmp_path / "training_state_e1_b0.pt"
    old = torch.load(training_path, weights_only=True)
    old = {"version": 1, "epochs_completed": 1, "batches_in_epoch_completed": 0,
           **{key: value for key, value in old.items() if key not in ("version", "trainer_state")}}
    torch.save(old, training_path)
    manifest_path = tmp_path / "checkpoint_e1_b0.json"
    manifest = json.loads(manifest_path.read_text())
    from ipuflow.storage import file_sha256

    manifest["sha256"][training_path.name] = file_sha256(training_path)
    manifest["run_status"] = {}  # still training, so that resuming reads the training state
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="training-state version 1; this ipuflow reads version 2"):
        build(tmp_path, {"num_epochs": 2}, with_validation=False).train()


def test_should_epoch_stop_ends_the_epoch_and_the_next_one_runs(tmp_path):
    class EndEpochZeroAtCall3(TrainerCallback):
        def on_step_end(self, event):
            if event.epoch == 0 and event.batch_number == 3:
                event.control.should_epoch_stop = True

    trainer = build(tmp_path, {"num_epochs": 2}, train=16, validation=8)  # 4 calls per epoch
    trainer.add_callback(EndEpochZeroAtCall3(str(tmp_path)))
    trainer.train()
    epoch0 = json.loads((tmp_path / "metrics_epoch_0.json").read_text())
    epoch1 = json.loads((tmp_path / "metrics_epoch_1.json").read_text())
    assert epoch0["host_calls"] == 3 and "validation_loss" in epoch0
    assert epoch1["host_calls"] == 7
    assert (tmp_path / "model_state_e1_b0.safetensors").exists() and trainer.control.should_epoch_stop is False
    assert trainer.run_status.stopped == "num_epochs"


def test_should_log_is_honoured_after_the_call_that_asked(tmp_path):
    class AskForLogs(TrainerCallback):
        def __init__(self, serialization_dir):
            super().__init__(serialization_dir)
            self.logged = []

        def on_step_begin(self, event):
            if event.batch_number == 2:
                event.control.should_log = True

        def on_step_end(self, event):
            if event.batch_number == 5:
                event.control.should_log = True

        def on_log(self, event):
            self.logged.append((event.state.global_step, sorted(event.logs)))

    asker = AskForLogs(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 1, "log_interval": 100}, train=32, with_validation=False)
    trainer.add_callback(asker)
    trainer.train()
    assert asker.logged == [(2, ["batch_loss", "loss", "lr"]), (5, ["batch_loss", "loss", "lr"])]
    assert trainer.control.should_log is False
    assert [entry["step"] for entry in trainer.state.log_history] == [2, 5]


def test_hf_names_of_the_control_flags():
    from ipuflow.training.events import TrainerControl

    control = TrainerControl()
    control.should_training_stop = True
    control.should_evaluate = True
    assert control.should_stop and control.should_validate


def test_a_hook_with_the_old_positional_signature_is_refused_when_defined():
    with pytest.raises(TypeError, match=r"OldLog.on_log must take \(self, event\)"):
        class OldLog(TrainerCallback):
            def on_log(self, trainer, logs, step, is_training=True, **kwargs):
                pass


def test_is_primary_follows_the_installed_check():
    from ipuflow.training.state.trainer_state import is_primary, set_primary_check

    callback = TrainerCallback("unused")
    assert callback.is_primary and is_primary()
    set_primary_check(lambda: False)
    try:
        assert not callback.is_primary and not TrainerState().is_world_process_zero
    finally:
        set_primary_check(None)
    assert callback.is_primary


def test_a_trainer_state_with_unknown_keys_is_refused_with_the_checkpoint_named(tmp_path):
    from ipuflow.training.checkpoints.training_state import TRAINING_STATE_VERSION, restore_training_state

    state = {"version": TRAINING_STATE_VERSION, "trainer_state": {**TrainerState().to_dict(), "from_the_future": 1}}
    with pytest.raises(ConfigurationError, match=r"checkpoint in runs/x holds no readable trainer state.*from_the_future"):
        restore_training_state(state, [], "runs/x")
    assert restore_training_state({"version": TRAINING_STATE_VERSION, "trainer_state": {"global_step": 3}}, [],
                                  "runs/x") == TrainerState(global_step=3)
