"""The progress bar shows the training loss from an epoch's first host call (issue 36, point 10): it
showed none before the first logging point (10 updates), so a run of 9 updates never showed one.
The loss is read once per epoch for it, never per call."""

from tests.training.test_trainer import build


def test_a_run_of_nine_updates_shows_its_loss(tmp_path, capsys):
    trainer = build(tmp_path, {"num_epochs": 1, "log_interval": 10,
                               "callbacks": [{"type": "progress", "file_friendly": True, "file_friendly_interval": 0}]},
                    train=18, validation=4, batch_size=2)
    assert len(trainer.data_loader) == 9
    trainer.train()
    bar = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch 0 training")]
    assert bar and "loss: " in bar[-1] and "batch_loss: " in bar[-1], bar
    # no logging point was added (on_log, log_history, TensorBoard): the read was for the bar alone
    assert [entry for entry in trainer.state.log_history if "batch_loss" in entry] == []
