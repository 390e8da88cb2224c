"""Gradient value clipping is an executor option (`max_grad_value`), applied to the unscaled,
reduced gradient; the trainer's `grad_clipping` key is its alias."""

from __future__ import annotations

import sys

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.execution import NativeExecutor, StepExecutor
from tests.execution.executor_test_models import Regression, regression_batch
from tests.execution.test_contract import assert_same_weights, weights
from tests.execution.torch_capabilities import needs_cpu_grad_scaler


def _reference_clipped_update(model: Regression, batch: dict, micro_batches: int, clip: float, lr: float) -> None:
    """One SGD update on the mean gradient of `micro_batches` micro-batches, clamped to ±clip."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    micro = next(iter(batch.values())).shape[0] // micro_batches
    for index in range(micro_batches):
        loss = model(**{key: value[index * micro:(index + 1) * micro] for key, value in batch.items()})["loss"]
        (loss / micro_batches).backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), clip)
    optimizer.step()


@pytest.mark.parametrize("scaling", [{}, {"loss_scaling": 1024.0},
                                     pytest.param({"loss_scaling": 1024.0, "auto_loss_scaling": True}, marks=needs_cpu_grad_scaler)])
def test_value_clipping_bounds_the_unscaled_reduced_gradient(scaling):
    model, reference = Regression(), Regression()
    batch = regression_batch(8)
    batch["y"] *= 100.0  # large gradients, so that the bound matters
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=1.0), device="cpu",
                              gradient_accumulation=2, replication_factor=2, max_grad_value=0.05, **scaling)
    before = weights(model)
    executor(batch)
    moved = (weights(model)["linear.weight"] - before["linear.weight"]).abs()
    # Every gradient entry is far beyond the bound, so each weight moves by exactly lr × 0.05.
    torch.testing.assert_close(moved, torch.full_like(moved, 0.05))
    _reference_clipped_update(reference, batch, 4, 0.05, 1.0)
    assert_same_weights(weights(model), weights(reference))


def test_bad_max_grad_value_names_the_key():
    model = Regression()
    with pytest.raises(ConfigurationError, match="^max_grad_value: "):
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", max_grad_value=0)


def test_poptorch_refuses_value_clipping_at_build_time(monkeypatch):
    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    model = Regression()
    with pytest.raises(ConfigurationError, match="^max_grad_value: .*max_grad_norm"):
        StepExecutor.by_name("poptorch")(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), max_grad_value=0.5)


def _trainer(tmp_path, config):
    import ipuflow.training  # noqa: F401
    from ipuflow.training import Trainer
    from tests.training.regression import LinearRegression, loaders

    torch.manual_seed(0)
    train, _ = loaders(train=8, batch_size=4)
    full = {"num_epochs": 1, "optimizer": {"type": "sgd", "lr": 1.0}, "enable_default_callbacks": False,
            "checkpointer": None, **config}
    return Trainer.from_params(Params(full), model=LinearRegression(), serialization_dir=str(tmp_path), data_loader=train)


def test_the_trainers_grad_clipping_sets_the_executor_option_and_is_not_loss_scaled(tmp_path):
    trainer = _trainer(tmp_path / "a", {"grad_clipping": 0.05, "executor": {"type": "native", "loss_scaling": 1024.0}})
    assert trainer.executor.options.max_grad_value == 0.05
    weight = trainer.model.linear.weight
    assert not weight._backward_hooks  # no hooks the executor cannot see
    batch = next(iter(trainer.data_loader))
    batch = {**batch, "target": batch["target"] * 100.0}
    before = weight.detach().clone()
    trainer.executor(batch)
    # The bound is 0.05 on the real gradient, not 0.05 / 1024 on the scaled one.
    torch.testing.assert_close((weight.detach() - before).abs().max(), torch.tensor(0.05))
    _trainer(tmp_path / "b", {"grad_clipping": 0.05, "executor": {"type": "native", "max_grad_value": 0.05}})
    with pytest.raises(ConfigurationError, match="grad_clipping.*max_grad_value"):
        _trainer(tmp_path / "c", {"grad_clipping": 0.05, "executor": {"type": "native", "max_grad_value": 0.1}})
