"""Automatic loss scaling as each backend implements it.

poptorch (`Options.Training.setAutomaticLossScaling`) enables PopART's: the update is never skipped;
after each update the loss scale is halved when more than a proportion 1e-7 of the tracked gradient
elements lie above a bin edge at 1/16 of their dtype's maximum, and doubled otherwise, clipped at 2^15
for a half model (popart willow/src/transforms/automaticlossscaling.cpp getLevels,
willow/src/popx/op/lossscaleupdatex.cpp, willow/include/popart/sessionoptions.hpp defaults).

The native executor uses torch's GradScaler instead: a non-finite step is skipped and the scale halves.
"""

from __future__ import annotations

from typing import Dict

import pytest
import torch

from ipuflow.execution import NativeExecutor, PoptorchExecutor
from tests.execution.executor_test_models import Regression, regression_batch
from tests.execution.torch_capabilities import needs_cpu_grad_scaler, needs_cpu_half_kernels


pytestmark = pytest.mark.usefixtures("stand_in")


def _weights(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def _poptorch(precision: str = "fp32", loss_scaling: float = 128.0) -> PoptorchExecutor:
    model = Regression()
    return PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.01), precision=precision,
                            auto_loss_scaling=True, loss_scaling=loss_scaling)


def _scale(executor: PoptorchExecutor) -> float:
    return executor.poplar_executor._device_optimizer.loss_scaling


def test_poptorch_doubles_the_scale_after_an_update_whose_gradients_stay_low():
    executor = _poptorch()
    executor(regression_batch(2))
    assert _scale(executor) == 256.0
    executor(regression_batch(2))
    assert _scale(executor) == 512.0


@needs_cpu_half_kernels
def test_poptorch_halves_the_scale_after_an_update_with_gradients_in_the_upper_bin_and_still_applies_it():
    # A half model: the bin edge is 65535 / 16; targets of 1e3 give scaled gradients far above it.
    executor = _poptorch(precision="fp16", loss_scaling=64.0)
    batch = regression_batch(2)
    batch["y"] = batch["y"] * 1e3
    executor.copy_weights_to_host()
    before = _weights(executor.model)
    executor(batch)
    executor.copy_weights_to_host()
    after = _weights(executor.model)
    assert _scale(executor) == 32.0
    assert not torch.equal(after["linear.weight"], before["linear.weight"]), "PopART never skips the update"


def test_poptorch_applies_an_update_with_non_finite_gradients():
    executor = _poptorch()
    batch = regression_batch(2)
    batch["y"][0, 0] = float("inf")
    executor(batch)
    executor.copy_weights_to_host()
    assert not torch.isfinite(executor.model.linear.weight).all(), "the non-finite update reached the weights"
    assert _scale(executor) == 64.0


@needs_cpu_half_kernels
def test_poptorch_clips_a_half_models_scale_at_two_to_the_fifteen():
    executor = _poptorch(precision="fp16", loss_scaling=2.0**14)
    # Zero inputs and the bias as target: every gradient is zero, all in the lower bin.
    batch = {"x": torch.zeros(1, 4), "y": executor.model.linear.bias.detach().float().unsqueeze(0)}
    executor(batch)
    assert _scale(executor) == 2.0**15
    executor(batch)
    assert _scale(executor) == 2.0**15


@needs_cpu_grad_scaler
def test_native_skips_a_non_finite_step_and_halves_the_scale():
    model = Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.01), device="cpu", auto_loss_scaling=True,
                              loss_scaling=128.0)
    before = _weights(model)
    batch = regression_batch(2)
    batch["y"][0, 0] = float("inf")
    executor(batch)
    assert all(torch.equal(value, before[key]) for key, value in _weights(model).items()), "the step was skipped"
    assert executor.loss_scale == 64.0
