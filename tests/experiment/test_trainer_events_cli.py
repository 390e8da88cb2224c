"""Issue 15 through `ipuflow train`: a callback given by its class path hears the events of a real
run, the test-set scoring included (`on_prediction_step` of the test split, then `on_predict`), and
the run directory holds trainer_state.json, restored by `-r` with a raised limit."""

import json

import pytest

from ipuflow.commands.cli import run
from ipuflow.training import TrainerCallback

from tests.experiment.conftest import tiny_config


class NamesEvents(TrainerCallback):
    """Records (event, split, global_step) in a list shared by all instances."""

    seen = []

    def _note(self, event):
        NamesEvents.seen.append((event.name, event.split, event.state.global_step, event.metrics))

    on_train_begin = on_epoch_end = on_train_end = on_prediction_step = on_predict = _note


@pytest.mark.slow  # two real training runs through the CLI
def test_test_set_events_and_trainer_state_through_the_cli(tiny_data, tmp_path, capsys):
    path = f"{NamesEvents.__module__}.NamesEvents"
    config = tiny_config(tiny_data, num_epochs=1, callbacks=[{"type": path}])
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    NamesEvents.seen.clear()
    directory = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(directory)]) == 0

    names = [(name, split) for name, split, _, _ in NamesEvents.seen]
    end = names.index(("on_train_end", "train"))
    assert names[end + 1:-1] and set(names[end + 1:-1]) == {("on_prediction_step", "test")}
    assert names[-1] == ("on_predict", "test")
    test_metrics = NamesEvents.seen[-1][3]
    final = json.loads((directory / "metrics.json").read_text())
    assert final["test_accuracy"] == test_metrics["accuracy"]

    state = json.loads((directory / "trainer_state.json").read_text())
    assert state["global_step"] == final["optimizer_updates"] and state["epochs_completed"] == 1
    assert state["num_train_epochs"] == 1 and state["best_epoch"] == 0

    # -r with a raised num_epochs continues from the saved state.
    NamesEvents.seen.clear()
    assert run(["train", str(config_file), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 2}']) == 0
    begin = NamesEvents.seen[0]
    assert begin[0] == "on_train_begin" and begin[2] == state["global_step"]
    resumed = json.loads((directory / "trainer_state.json").read_text())
    assert resumed["epochs_completed"] == 2 and resumed["global_step"] == 2 * state["global_step"]
    assert resumed["log_history"][:len(state["log_history"])] == state["log_history"]

    # A checkpoint in the training-state layout of an older ipuflow: -r says so and exits 2, no traceback.
    import torch

    from ipuflow.storage import file_sha256

    manifest_path = sorted(directory.glob("checkpoint_e*_b*.json"))[-1]
    training_path = directory / manifest_path.name.replace("checkpoint_", "training_state_").replace(".json", ".pt")
    old = torch.load(training_path, weights_only=True)
    torch.save({**{key: value for key, value in old.items() if key != "trainer_state"}, "version": 1}, training_path)
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"][training_path.name] = file_sha256(training_path)
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert run(["train", str(config_file), "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 3}']) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "version 1; this ipuflow reads version 2" in error and "Traceback" not in error
