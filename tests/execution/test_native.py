"""Native-only behaviour: devices, precision and loss scaling, torch.compile, option validation."""

from __future__ import annotations

import warnings

import pytest
import torch

from ipuflow.config import ConfigurationError, Lazy, Params
from ipuflow.execution import NativeExecutor, StepExecutor
from ipuflow.execution.precision import LossScaler
from tests.execution.executor_test_models import Regression, regression_batch
from tests.execution.test_contract import assert_same_weights, reference_training, weights
from tests.execution.torch_capabilities import needs_cpu_fp16_autocast, needs_cpu_grad_scaler, needs_torch_compile


def test_native_is_the_default_implementation():
    assert StepExecutor.list_available()[0] == "native"
    assert StepExecutor.by_name("native") is NativeExecutor


@pytest.mark.parametrize(
    "options, key",
    [
        ({"device_iterations": 0}, "device_iterations"),
        ({"gradient_accumulation": 1.5}, "gradient_accumulation"),
        ({"replication_factor": True}, "replication_factor"),
        ({"output_mode": "last"}, "output_mode"),
        ({"precision": "fp8"}, "precision"),
        ({"loss_scaling": -1.0}, "loss_scaling"),
        ({"max_grad_norm": 0}, "max_grad_norm"),
        ({"output_mode": "every_n", "output_period": 3, "device_iterations": 2}, "output_period"),
        ({"device": "tpu"}, "device"),
        ({"compile": "yes"}, "compile"),
    ],
)
def test_bad_options_are_configuration_errors_naming_the_key(options, key):
    model = Regression()
    with pytest.raises(ConfigurationError) as error:
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), **{"device": "cpu", **options})
    assert error.value.key == key  # relative to the section; the resolver adds where it sits


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_asking_for_cuda_without_cuda_is_a_clear_error():
    model = Regression()
    with pytest.raises(ConfigurationError, match="no CUDA device"):
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cuda")


def test_an_optimizer_over_other_parameters_is_an_error():
    with pytest.raises(ConfigurationError, match="not the model's"):
        NativeExecutor(Regression(), torch.optim.SGD(Regression().parameters(), lr=0.1), device="cpu")


def test_the_loss_stays_a_tensor_and_is_the_mean_over_every_micro_batch():
    model = Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.0), device="cpu", device_iterations=2, gradient_accumulation=2, output_mode="all")
    result = executor(regression_batch(8))
    assert isinstance(result.loss, torch.Tensor) and result.loss.dim() == 0
    torch.testing.assert_close(result.loss, result.outputs["loss"].mean())


def test_bf16_autocast_trains_close_to_fp32():
    model, reference = Regression(), Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", precision="bf16", device_iterations=2)
    batch = regression_batch(8)
    result = executor(batch)
    assert result.outputs["prediction"].dtype == torch.bfloat16
    assert model.linear.weight.dtype == torch.float32  # weights stay fp32
    reference_training(reference, torch.optim.SGD(reference.parameters(), lr=0.1), batch, 2, 1, 1)
    torch.testing.assert_close(model.linear.weight, reference.linear.weight, rtol=0.05, atol=0.02)


def test_static_loss_scaling_in_fp32_is_a_numerical_no_op():
    scaled, plain = Regression(), Regression()
    executor_scaled = NativeExecutor(scaled, torch.optim.SGD(scaled.parameters(), lr=0.1), device="cpu", loss_scaling=1024.0, max_grad_norm=0.1)
    executor_plain = NativeExecutor(plain, torch.optim.SGD(plain.parameters(), lr=0.1), device="cpu", max_grad_norm=0.1)
    for call in range(3):
        batch = regression_batch(2, seed=call)
        executor_scaled(batch)
        executor_plain(batch)
    assert_same_weights(weights(scaled), weights(plain))


@needs_cpu_fp16_autocast
def test_fp16_with_static_loss_scaling_trains_close_to_fp32():
    model, reference = Regression(), Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", precision="fp16", loss_scaling=128.0)
    batch = regression_batch(4)
    result = executor(batch)
    assert result.outputs["prediction"].dtype == torch.float16
    reference_training(reference, torch.optim.SGD(reference.parameters(), lr=0.1), batch, 1, 1, 1)
    torch.testing.assert_close(model.linear.weight, reference.linear.weight, rtol=0.02, atol=0.01)


@needs_cpu_grad_scaler
def test_dynamic_loss_scaling_skips_a_non_finite_update_and_lowers_the_scale():
    model = Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", precision="fp16", auto_loss_scaling=True, loss_scaling=1024.0)
    before = weights(model)
    bad = regression_batch(2)
    bad["x"][0, 0] = float("inf")
    executor(bad)
    assert_same_weights(weights(model), before)  # the update was skipped
    assert executor.loss_scale == 512.0
    executor(regression_batch(2))
    assert not torch.equal(weights(model)["linear.weight"], before["linear.weight"])
    state = executor.state_dict()["loss_scaler"]
    assert state["scale"] == 512.0


@needs_cpu_grad_scaler
def test_loss_scaler_state_round_trips():
    scaler = LossScaler("cpu", 64.0, True, 1)
    state = scaler.state_dict()
    other = LossScaler("cpu", None, True, 1)
    other.load_state_dict(state)
    assert other.scale == 64.0


def test_length_bucket_signatures_can_be_compiled_explicitly():
    model = torch.nn.Module()
    model.embedding = torch.nn.Embedding(10, 3)

    def forward(tokens: torch.Tensor) -> dict:
        return {"pooled": model.embedding(tokens).mean(1)}

    model.forward = forward  # type: ignore[method-assign]
    executor = NativeExecutor(model, None, training=False, device="cpu")
    executor.compile({"tokens": torch.zeros(2, 8, dtype=torch.long)})
    executor.compile({"tokens": torch.zeros(2, 16, dtype=torch.long)})
    assert executor({"tokens": torch.zeros(2, 16, dtype=torch.long)}).outputs["pooled"].shape == (2, 3)
    with pytest.raises(ValueError, match=r"Shape mismatch for tokens: expected \(2, 8\) or \(2, 16\)"):
        executor({"tokens": torch.zeros(2, 12, dtype=torch.long)})
    with pytest.raises(ValueError, match="Data type mismatch"):
        executor.compile({"tokens": torch.zeros(2, 12, dtype=torch.int32)})


@pytest.mark.slow
@needs_torch_compile
def test_compiled_executor_matches_eager_within_tolerance():
    eager_model, compiled_model = Regression(), Regression()
    eager = NativeExecutor(eager_model, torch.optim.Adam(eager_model.parameters(), lr=0.01), device="cpu", device_iterations=2, gradient_accumulation=2)
    compiled = NativeExecutor(compiled_model, torch.optim.Adam(compiled_model.parameters(), lr=0.01), device="cpu", device_iterations=2, gradient_accumulation=2, compile=True)
    for call in range(3):
        batch = regression_batch(8, seed=call)
        eager_result = eager(batch)
        compiled_result = compiled(batch)
        torch.testing.assert_close(compiled_result.loss, eager_result.loss, rtol=1e-5, atol=1e-6)
    assert_same_weights(weights(compiled_model), weights(eager_model))
    inference = compiled.inference_executor()
    torch.testing.assert_close(inference(regression_batch(4)).outputs["prediction"], eager.inference_executor()(regression_batch(4)).outputs["prediction"])


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
def test_cuda_executor_moves_inputs_and_matches_cpu():
    gpu_model, cpu_model = Regression(), Regression()
    gpu = NativeExecutor(gpu_model, torch.optim.SGD(gpu_model.parameters(), lr=0.1), device="cuda", device_iterations=2)
    cpu = NativeExecutor(cpu_model, torch.optim.SGD(cpu_model.parameters(), lr=0.1), device="cpu", device_iterations=2)
    batch = regression_batch(4)
    result = gpu(batch)
    cpu(batch)
    assert result.loss.device.type == "cuda"
    assert gpu.device.type == "cuda" and gpu_model.linear.weight.device.type == "cuda"
    torch.testing.assert_close(gpu_model.linear.weight.cpu(), cpu_model.linear.weight, rtol=1e-4, atol=1e-5)


@pytest.mark.cuda
@cuda
def test_cuda_fp16_dynamic_loss_scaling_runs():
    model = Regression()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cuda", precision="fp16", auto_loss_scaling=True)
    result = executor(regression_batch(4))
    assert torch.isfinite(result.loss).item()
    assert executor.state_dict()["rng"]["cuda"]


@needs_torch_compile
def test_built_from_config_as_lazy_with_the_model_and_optimizer_injected():
    # As the trainer does: Lazy[StepExecutor] from the executor block, constructed with model and optimizer.
    lazy = Lazy(StepExecutor, Params({"device": "cpu", "device_iterations": 2, "compile": {"mode": "default"}}))
    model = Regression()
    executor = lazy.construct(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert isinstance(executor, NativeExecutor) and executor.batch_size_factor == 2
    with pytest.raises(ConfigurationError, match="device_iteration"):
        StepExecutor.from_params(Params({"device_iteration": 2}), model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


def test_resuming_with_another_cpu_thread_count_warns_that_the_weights_will_differ_in_the_last_bits():
    # torch's CPU matmul (oneMKL sgemm) sums in an order that depends on the thread count: a resume
    # with another count is not bitwise equal to the uninterrupted run (docs/training.md).
    def executor() -> NativeExecutor:
        model = Regression()
        return NativeExecutor(model, torch.optim.Adam(model.parameters(), lr=0.01), device="cpu")

    saving = executor()
    saving(regression_batch(4, seed=0))
    before = torch.get_num_threads()
    state = saving.state_dict()
    assert state["cpu_threads"] == before
    try:
        torch.set_num_threads(before + 1)
        with pytest.warns(UserWarning, match=rf"written with {before} CPU threads.*runs {before + 1}.*num_threads: {before}"):
            executor().load_state_dict(state)
        torch.set_num_threads(before)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            executor().load_state_dict(state)  # the same count: bitwise, nothing to say
            executor().load_state_dict({key: value for key, value in state.items() if key != "cpu_threads"})  # older checkpoint
    finally:
        torch.set_num_threads(before)
