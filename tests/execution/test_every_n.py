"""Output mode every_n as PopART defines it (AnchorReturnTypeId::EveryN in popart's dataflow.hpp):
every N-th *global batch* (one weight update's micro-batches) comes back, with all its accumulation
steps, and N must divide device_iterations (DataFlow::isValidAnchorReturnPeriod). Run on both backends."""

from __future__ import annotations

import sys

import pytest
import torch

from ipuflow.config import ConfigurationError
from tests.execution import fake_poptorch
from tests.execution.executor_test_models import Echo


def _numbered(samples: int) -> dict:
    # One row per micro-batch (micro-batch size 1), holding its own index.
    return {"x": torch.arange(samples, dtype=torch.float32).unsqueeze(1)}


def test_every_n_with_accumulation_returns_whole_global_batches(build):
    # DI 4, GA 2, N 2: the micro-batches are 0..7, global batches [0,1] [2,3] [4,5] [6,7];
    # PopART returns the 2nd and 4th global batches: micro-batches 2, 3, 6, 7 (not 1, 3, 5, 7).
    model = Echo()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.0), device_iterations=4, gradient_accumulation=2,
                     output_mode="every_n", output_period=2)
    outputs = executor(_numbered(8)).outputs
    assert outputs["echo"].squeeze(1).tolist() == [2.0, 3.0, 6.0, 7.0]
    assert outputs["loss"].tolist() == [2.0, 3.0, 6.0, 7.0]


def test_every_n_with_replicas_keeps_each_replicas_micro_batches(build):
    # DI 2, GA 2, R 2: per update, accumulation step g holds replicas' rows [2g, 2g+1]; N 2 keeps update 1.
    model = Echo()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.0), device_iterations=2, gradient_accumulation=2,
                     replication_factor=2, output_mode="every_n", output_period=2)
    assert executor(_numbered(8)).outputs["echo"].squeeze(1).tolist() == [4.0, 5.0, 6.0, 7.0]


def test_every_n_in_inference_counts_device_iterations(build):
    model = Echo()
    executor = build(model, training=False, device_iterations=6, inference_output_mode="every_n", output_period=3)
    assert executor(_numbered(6)).outputs["echo"].squeeze(1).tolist() == [2.0, 5.0]


@pytest.mark.parametrize("period", [3, 8])
def test_a_period_that_does_not_divide_device_iterations_is_a_configuration_error(build, period):
    # device_iterations 4 × accumulation 2 = 8 micro-batches, which 8 divides, but PopART counts updates.
    model = Echo()
    with pytest.raises(ConfigurationError) as error:
        build(model, torch.optim.SGD(model.parameters(), lr=0.0), device_iterations=4, gradient_accumulation=2,
              output_mode="every_n", output_period=period)
    assert error.value.key == "output_period"
    assert "device_iterations (4)" in str(error.value) and f"found {period}" in str(error.value)


def test_an_inference_every_n_period_is_checked_against_the_inference_device_iterations():
    from ipuflow.execution.options import ExecutionOptions

    with pytest.raises(ConfigurationError, match="^output_period: .*device_iterations \\(3\\)"):
        ExecutionOptions(device_iterations=4, inference_device_iterations=3, output_period=2, inference_output_mode="every_n")


def test_the_stand_in_refuses_a_period_popart_refuses(monkeypatch):
    # PopART's DataFlow::isValidAnchorReturnPeriod, checked when the session is built (at compile).
    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    model = Echo()
    options = fake_poptorch.Options().deviceIterations(4)
    options.Training.gradientAccumulation(2)
    options.outputMode(fake_poptorch.OutputMode.EveryN, 8)
    executor = fake_poptorch.trainingModel(model, options, fake_poptorch.optim.SGD(model.parameters(), lr=0.0))
    with pytest.raises(RuntimeError, match="Return period must be <= to the number of batches per step"):
        executor.compile(x=torch.zeros(8, 1))
