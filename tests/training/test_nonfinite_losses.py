"""Issue 35: a NaN/inf loss is filtered from the logged running loss (as the Hugging Face Trainer's
`logging_nan_inf_filter`: the mean of the finite losses so far takes its place), counted and reported;
training stops only after `stop_after_nonfinite_losses` in a row."""

import json

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.training import NonFiniteLossError, Trainer
from tests.training.regression import LinearRegression, loaders


class NonFiniteAtCalls(LinearRegression):
    """Reports a NaN loss on the training forwards numbered in `calls` (1-based); the gradients stay
    those of the true loss (the NaN is a constant added to it), so the weights stay finite."""

    def __init__(self, calls) -> None:
        super().__init__()
        self.calls, self.forwards, self.true_losses = set(calls), 0, []

    def forward(self, features, target, **rest):
        outputs = super().forward(features, target, **rest)
        if self.training:
            self.forwards += 1
            self.true_losses.append(float(outputs["loss"].detach()))
            if self.forwards in self.calls:
                outputs["loss"] = outputs["loss"] + float("nan")
        return outputs


def build(tmp_path, model, **config):
    torch.manual_seed(0)
    train, validation = loaders(train=16, validation=8, batch_size=4)
    full = {"num_epochs": 1, "optimizer": {"type": "sgd", "lr": 0.01}, "enable_default_callbacks": False,
            "log_interval": 1, **config}
    return Trainer.from_params(Params(full), model=model, serialization_dir=str(tmp_path), data_loader=train,
                               validation_data_loader=validation)


def test_a_nan_loss_is_replaced_by_the_mean_so_far_counted_and_training_goes_on(tmp_path):
    model = NonFiniteAtCalls(calls={2})
    trainer = build(tmp_path, model)
    metrics = trainer.train()
    first = model.true_losses[0]
    # Call 2's loss is replaced by the mean of call 1's: the mean after 4 calls.
    expected_mean = (first + first + model.true_losses[2] + model.true_losses[3]) / 4
    assert metrics["training_loss"] == pytest.approx(expected_mean, rel=1e-5)
    assert metrics["training_nonfinite_losses"] == 1
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry.get("nonfinite_losses") for entry in logs] == [None, 1, 1, 1]
    assert all(entry["loss"] == entry["loss"] for entry in logs)  # every logged running loss is a number
    assert json.loads((tmp_path / "metrics_epoch_0.json").read_text())["training_nonfinite_losses"] == 1


def test_training_stops_after_the_configured_run_of_non_finite_losses(tmp_path):
    with pytest.raises(NonFiniteLossError, match="last 2 host calls in a row"):
        build(tmp_path, NonFiniteAtCalls(calls={2, 3}), stop_after_nonfinite_losses=2).train()


def test_interrupted_runs_of_non_finite_losses_do_not_stop_training(tmp_path):
    trainer = build(tmp_path, NonFiniteAtCalls(calls={1, 3}), stop_after_nonfinite_losses=2)
    assert trainer.train()["training_nonfinite_losses"] == 2


def test_null_never_stops(tmp_path):
    trainer = build(tmp_path, NonFiniteAtCalls(calls={1, 2, 3, 4}), stop_after_nonfinite_losses=None)
    assert trainer.train()["training_nonfinite_losses"] == 4


def test_a_bad_limit_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="stop_after_nonfinite_losses"):
        build(tmp_path, LinearRegression(), stop_after_nonfinite_losses=0)
