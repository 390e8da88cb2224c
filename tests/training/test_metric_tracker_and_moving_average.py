import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.training import MetricTracker, MovingAverage


def test_improvement_is_strictly_greater():
    tracker = MetricTracker("+acc")
    for value in [0.3, 0.3, 0.3, 0.2, 0.5, 0.1, 0.3]:
        tracker.add_metrics({"acc": value})
    assert not tracker.is_best_so_far()
    assert tracker.best_epoch == 4
    tracker = MetricTracker("+acc")
    tracker.add_metrics({"acc": 0.3})
    tracker.add_metrics({"acc": 0.3})
    assert not tracker.is_best_so_far()


def test_patience_stops_and_none_never_stops():
    tracker = MetricTracker("+acc", patience=5)
    for value in [0.5, 0.3, 0.2, 0.1, 0.4, 0.4]:
        tracker.add_metrics({"acc": value})
    assert tracker.should_stop_early()
    tracker = MetricTracker("+acc")
    for value in [0.5, 0.3, 0.2, 0.1, 0.4, 0.4]:
        tracker.add_metrics({"acc": value})
    assert not tracker.should_stop_early()


@pytest.mark.parametrize("patience", [0, -1, 1.5, "None", True])
def test_invalid_patience(patience):
    with pytest.raises(ConfigurationError, match="^patience: "):
        MetricTracker("-loss", patience)


def test_metric_names_need_a_sign_and_lists_are_summed():
    with pytest.raises(ConfigurationError, match="must start with \\+ .*'acc'"):
        MetricTracker("acc")
    tracker = MetricTracker(["+acc", "-loss"])
    assert tracker.combined_score({"acc": 0.75, "loss": 0.25}) == 0.5
    with pytest.raises(ConfigurationError, match="'acc'.*only \\['loss'\\]"):
        tracker.combined_score({"loss": 1.0})


def test_tracker_state_round_trips():
    tracker = MetricTracker("-loss", patience=2)
    tracker.add_metrics({"loss": 1.0})
    tracker.add_metrics({"loss": 2.0})
    tracker.best_epoch_metrics = {"loss": 1.0}
    restored = MetricTracker("-loss", patience=2)
    restored.load_state_dict(tracker.state_dict())
    restored.add_metrics({"loss": 3.0})
    assert restored.should_stop_early() and restored.best_epoch_metrics == {"loss": 1.0}


def test_exponential_moving_average_with_warm_up_and_swap():
    layer = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(0.0)
    average = MovingAverage.from_params(Params({"decay": 0.9}), parameters=list(layer.named_parameters()))
    with torch.no_grad():
        layer.weight.fill_(1.0)
    average.apply(num_updates=1)  # decay = min(0.9, 2/11)
    expected = 1 - 2 / 11
    assert layer.weight.item() == 1.0
    average.assign_average_value()
    assert layer.weight.item() == pytest.approx(expected)
    average.restore()
    assert layer.weight.item() == 1.0
    average.apply()  # decay 0.9
    average.assign_average_value()
    assert layer.weight.item() == pytest.approx(0.9 * expected + 0.1)
    average.restore()

    other = torch.nn.Linear(1, 1, bias=False)
    restored = MovingAverage.from_params(Params({"decay": 0.9}), parameters=list(other.named_parameters()))
    restored.load_state_dict(average.state_dict())
    restored.assign_average_value()
    assert other.weight.item() == pytest.approx(0.9 * expected + 0.1)
