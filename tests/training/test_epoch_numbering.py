"""What users read about epochs agrees (issue 36, point 8). Epochs are numbered from 0, as AllenNLP's
metrics.json numbers them (`epoch`, `best_epoch`, `metrics_epoch_N.json`, the progress bar, the
console table), and TensorBoard's epoch scalars sit at that number; counts of completed epochs
(checkpoint names `_e{E}_b{B}`, trainer_state.json's Hugging Face `epoch`, the run's status line)
say that they are counts and which numbers they cover."""

import json

from tests.training.test_trainer import build


def test_epoch_numbers_agree_across_metrics_tensorboard_and_the_status_line(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = build(tmp_path, {"num_epochs": 3, "callbacks": ["tensorboard"]})
    metrics = trainer.train()
    assert metrics["epoch"] == 2  # AllenNLP's metrics.json: the last epoch's number, from 0
    assert sorted(path.name for path in tmp_path.glob("metrics_epoch_*.json")) == [
        "metrics_epoch_0.json", "metrics_epoch_1.json", "metrics_epoch_2.json"]
    for writer in ("train", "validation"):
        events = EventAccumulator(str(tmp_path / "log" / writer)).Reload()
        assert [event.step for event in events.Scalars("epoch/loss")] == [0, 1, 2]  # was 1, 2, 3
    status = trainer.run_status.describe()
    assert "after 3 complete epochs (numbered 0 to 2, as in metrics.json)" in status, status
    assert json.loads((tmp_path / "trainer_state.json").read_text())["epoch"] == 3.0  # Hugging Face's count


def test_the_status_line_names_a_single_epoch_and_none(tmp_path):
    from ipuflow.training.state.run_status import STOPPED_AT_NUM_EPOCHS, RunStatus

    one = RunStatus(stopped=STOPPED_AT_NUM_EPOCHS, num_epochs=1, epochs_completed=1, optimizer_updates=4)
    assert "after 1 complete epoch (numbered 0, as in metrics.json)" in one.describe()
    none = RunStatus(stopped=STOPPED_AT_NUM_EPOCHS, num_epochs=0, epochs_completed=0, optimizer_updates=0)
    assert "after 0 complete epochs and 0 optimizer updates" in none.describe()
