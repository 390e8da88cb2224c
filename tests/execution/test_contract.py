"""The step-executor contract (design.md §5), run on every backend."""

from __future__ import annotations

import io
import warnings
from typing import Dict, Optional

import pytest
import torch

from tests.execution.executor_test_models import Echo, IdentityLossRegression, NoLoss, Regression, regression_batch


def reference_training(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Dict[str, torch.Tensor],
    device_iterations: int,
    gradient_accumulation: int,
    replication_factor: int,
    max_grad_norm: Optional[float] = None,
) -> None:
    """A hand-written loop doing poptorch's updates for one host call."""
    combined = next(iter(batch.values())).shape[0]
    micro = combined // (device_iterations * gradient_accumulation * replication_factor)
    index = 0
    for _ in range(device_iterations):
        optimizer.zero_grad()
        for _ in range(gradient_accumulation):
            for _ in range(replication_factor):
                micro_batch = {key: value[index : index + micro] for key, value in batch.items()}
                index += micro
                loss = model(**micro_batch)["loss"]
                (loss / (gradient_accumulation * replication_factor)).backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()


def weights(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def assert_same_weights(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)


def test_one_call_consumes_the_combined_batch_and_performs_device_iterations_updates(build):
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    executor = build(model, optimizer, device_iterations=4, gradient_accumulation=8, replication_factor=2)
    assert executor.batch_size_factor == 64
    assert executor.updates_per_call == 4
    result = executor(regression_batch(128))  # micro-batch 2
    assert result.samples == 128
    assert result.optimizer_updates == 4
    # Final output mode: the last micro-batch of each replica.
    assert result.outputs["prediction"].shape == (2 * 2, 2)
    assert result.outputs["loss"].shape == (2,)
    assert result.loss is not None and result.loss.dim() == 0


def test_a_batch_that_is_not_a_multiple_of_the_factor_says_the_required_multiple(build):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), device_iterations=3, gradient_accumulation=2)
    with pytest.raises(Exception, match=r"must be a multiple of .* = 6"):
        executor(regression_batch(8))


@pytest.mark.parametrize(
    "optimizer_class, kwargs",
    [(torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}), (torch.optim.Adam, {"lr": 0.01}), (torch.optim.AdamW, {"lr": 0.01})],
)
def test_weights_match_a_hand_written_loop(build, optimizer_class, kwargs):
    di, ga, r = 3, 2, 2
    model, reference = Regression(), Regression()
    executor = build(model, optimizer_class(model.parameters(), **kwargs), device_iterations=di, gradient_accumulation=ga, replication_factor=r)
    reference_optimizer = optimizer_class(reference.parameters(), **kwargs)
    for call in range(3):
        batch = regression_batch(2 * di * ga * r, seed=call)
        executor(batch)
        reference_training(reference, reference_optimizer, batch, di, ga, r)
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))


def test_split_order_is_iteration_accumulation_replica_micro_batch(build):
    # Swapping two halves of the batch changes which samples each update sees, so the
    # weights after a call depend on the split order; the reference uses the documented one.
    model, reference = Regression(), Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.2), device_iterations=2, gradient_accumulation=2, replication_factor=2)
    batch = regression_batch(16)
    executor(batch)
    executor.copy_weights_to_host()
    reference_training(reference, torch.optim.SGD(reference.parameters(), lr=0.2), batch, 2, 2, 2)
    assert_same_weights(weights(model), weights(reference))
    permuted = Regression()
    reference_training(permuted, torch.optim.SGD(permuted.parameters(), lr=0.2), {k: v.flip(0) for k, v in batch.items()}, 2, 2, 2)
    assert not torch.allclose(weights(permuted)["linear.weight"], weights(model)["linear.weight"])


def test_gradient_accumulation_two_at_micro_one_equals_one_at_micro_two(build):
    accumulated, plain = Regression(), Regression()
    executor_accumulated = build(accumulated, torch.optim.SGD(accumulated.parameters(), lr=0.1), gradient_accumulation=2)
    executor_plain = build(plain, torch.optim.SGD(plain.parameters(), lr=0.1))
    for call in range(5):
        batch = regression_batch(2, seed=call)
        executor_accumulated(batch)
        executor_plain(batch)
    executor_accumulated.copy_weights_to_host()
    executor_plain.copy_weights_to_host()
    assert_same_weights(weights(accumulated), weights(plain))


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"x": torch.randn(6, 4), "y": torch.randn(6, 2)}, "Shape mismatch for x"),
        ({"x": torch.randn(8, 5), "y": torch.randn(8, 2)}, "Shape mismatch for x"),
        ({"x": torch.randn(8, 4).double(), "y": torch.randn(8, 2)}, "Data type mismatch for x"),
        ({"x": torch.randn(8, 4)}, "Structure mismatch"),
    ],
)
def test_after_compile_another_shape_dtype_or_structure_is_an_error(build, changed, message):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), gradient_accumulation=2)
    executor.compile(regression_batch(8))
    assert executor.is_compiled
    with pytest.raises(Exception, match=message):
        executor(changed)


@pytest.mark.parametrize(
    "mode, period, expected_rows",
    [("all", 1, list(range(10))), ("every_n", 5, [4, 9]), ("final", 1, [9])],
)
def test_inference_output_modes_return_the_chosen_micro_batches(build, mode, period, expected_rows):
    model = Echo()
    executor = build(model, None, training=False, device_iterations=10, inference_output_mode=mode, output_period=period)
    batch = {"x": torch.arange(10, dtype=torch.float32).reshape(10, 1)}
    result = executor(batch)
    torch.testing.assert_close(result.outputs["echo"], batch["x"][expected_rows])


def test_inference_sum_mode_sums_the_micro_batches(build):
    executor = build(Echo(), None, training=False, device_iterations=10, inference_output_mode="sum")
    result = executor({"x": torch.arange(10, dtype=torch.float32).reshape(10, 1)})
    torch.testing.assert_close(result.outputs["echo"], torch.tensor([[45.0]]))
    assert result.outputs["loss"].dim() == 0


@pytest.mark.parametrize(
    "mode, period, prediction_rows, loss_shape",
    [("all", 1, 12, (12,)), ("every_n", 3, 4, (4,)), ("final", 1, 2, (2,)), ("sum", 1, 2, (2,))],
)
def test_training_output_mode_shapes(build, mode, period, prediction_rows, loss_shape):
    # micro 1, DI 3, GA 2, R 2: 12 micro-batches, 6 steps per replica.
    model = Regression()
    executor = build(
        model, torch.optim.SGD(model.parameters(), lr=0.01), device_iterations=3, gradient_accumulation=2,
        replication_factor=2, output_mode=mode, output_period=period,
    )
    result = executor(regression_batch(12))
    assert result.outputs["prediction"].shape == (prediction_rows, 2)
    assert result.outputs["loss"].shape == loss_shape


def test_training_defaults_to_final_and_a_single_replica_returns_a_scalar_loss(build):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.01), device_iterations=4)
    result = executor(regression_batch(8))
    assert result.outputs["loss"].dim() == 0
    assert result.outputs["prediction"].shape == (2, 2)


def test_the_learning_rate_changes_only_through_set_optimizer(build):
    model, reference = Regression(), Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    executor = build(model, optimizer, device_iterations=2)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    batch = regression_batch(4)
    optimizer.param_groups[0]["lr"] = 0.5  # not sent: the call still uses 0.1
    executor(batch)
    reference_training(reference, reference_optimizer, batch, 2, 1, 1)
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))
    assert optimizer.param_groups[0]["lr"] == 0.5  # the user's object is left as the user set it
    executor.set_optimizer(optimizer)  # now 0.5 applies, for both updates of the next call
    executor(batch)
    reference_optimizer.param_groups[0]["lr"] = 0.5
    reference_training(reference, reference_optimizer, batch, 2, 1, 1)
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))


def test_a_scheduler_step_reaches_the_executor_through_set_optimizer(build):
    model, reference = Regression(), Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    executor = build(model, optimizer)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for call in range(3):
        batch = regression_batch(2, seed=call)
        executor(batch)
        scheduler.step()
        executor.set_optimizer(optimizer)
        reference_training(reference, reference_optimizer, batch, 1, 1, 1)
        reference_optimizer.param_groups[0]["lr"] *= 0.5
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))


def test_a_model_without_a_loss_in_training_is_an_error_that_says_so(build):
    model = NoLoss()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(Exception, match="(?i)loss"):
        executor(regression_batch(2))


def test_identity_loss_marks_the_loss(build):
    model, reference = IdentityLossRegression(), Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), gradient_accumulation=2)
    batch = regression_batch(4)
    executor(batch)
    reference_training(reference, torch.optim.SGD(reference.parameters(), lr=0.1), batch, 1, 2, 1)
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))


def test_max_grad_norm_clips_the_reduced_gradient_by_global_norm(build):
    model, reference = Regression(), Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), gradient_accumulation=2, replication_factor=2, max_grad_norm=0.05)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for call in range(3):
        batch = regression_batch(8, seed=call)
        executor(batch)
        reference_training(reference, reference_optimizer, batch, 1, 2, 2, max_grad_norm=0.05)
    executor.copy_weights_to_host()
    assert_same_weights(weights(model), weights(reference))
    unclipped = Regression()
    reference_training(unclipped, torch.optim.SGD(unclipped.parameters(), lr=0.1), regression_batch(8, seed=0), 1, 2, 2)
    assert not torch.allclose(weights(unclipped)["linear.weight"], weights(reference)["linear.weight"])


def test_inference_runs_without_gradients_with_output_mode_all_and_ignores_accumulation(build):
    model = Regression()
    executor = build(model, None, training=False, device_iterations=2, gradient_accumulation=4)
    assert not executor.training
    assert executor.batch_size_factor == 2
    assert executor.updates_per_call == 0
    before = weights(model)
    result = executor(regression_batch(6))
    assert result.optimizer_updates == 0
    assert result.outputs["prediction"].shape == (6, 2)
    assert result.outputs["loss"].shape == (2,)
    assert all(parameter.grad is None for parameter in model.parameters())
    assert_same_weights(before, weights(model))
    expected = model.linear(regression_batch(6)["x"]).detach()
    torch.testing.assert_close(result.outputs["prediction"], expected)


def test_inference_executor_uses_the_inference_options_and_sees_trained_weights(build):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), gradient_accumulation=2, inference_device_iterations=3)
    executor(regression_batch(4))
    inference = executor.inference_executor()
    assert inference is executor.inference_executor()
    assert not inference.training and inference.batch_size_factor == 3
    executor.detach()
    result = inference(regression_batch(6, seed=5))
    executor.copy_weights_to_host()
    expected = model.linear(regression_batch(6, seed=5)["x"]).detach()
    torch.testing.assert_close(result.outputs["prediction"], expected)


def test_a_training_executor_without_an_optimizer_is_an_error(build):
    with pytest.raises(Exception, match="optimizer"):
        build(Regression(), None)


def test_state_machine_follows_poptorch(build):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert not executor.is_compiled and not executor.is_attached
    with pytest.raises(Exception, match="Model has not been compiled or has been destroyed."):
        executor.detach()
    with pytest.raises(Exception, match="Model has not been compiled or has been destroyed."):
        executor.attach()
    executor.compile(regression_batch(2))
    assert executor.is_compiled and executor.is_attached
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        executor.compile(regression_batch(2))
    assert any("Call to compile() ignored" in str(warning.message) for warning in caught)
    with pytest.raises(Exception, match="Device is already attached"):
        executor.attach()
    executor.detach()
    assert not executor.is_attached
    with pytest.raises(Exception, match="Device is not attached"):
        executor.detach()
    executor(regression_batch(2))  # a detached executor re-attaches when called
    assert executor.is_attached
    executor.detach()
    executor.attach()
    assert executor.is_attached
    executor.destroy()
    assert not executor.is_compiled and not executor.is_attached
    executor.destroy()  # destroying twice is harmless
    executor(regression_batch(4))  # compiles again, for the new shape
    assert executor.is_compiled


def test_state_dict_round_trips_through_weights_only_load_and_reproduces_training(build):
    model = Regression()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    executor = build(model, optimizer, device_iterations=2)
    executor(regression_batch(4, seed=0))
    executor.copy_weights_to_host()
    saved_weights = weights(model)
    buffer = io.BytesIO()
    torch.save(executor.state_dict(), buffer)
    executor(regression_batch(4, seed=1))
    executor.copy_weights_to_host()
    continued = weights(model)

    restored_model = Regression()
    restored_model.load_state_dict(saved_weights)
    restored_optimizer = torch.optim.Adam(restored_model.parameters(), lr=0.01)
    restored = build(restored_model, restored_optimizer, device_iterations=2)
    buffer.seek(0)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    restored(regression_batch(4, seed=1))
    restored.copy_weights_to_host()
    assert_same_weights(weights(restored_model), continued)


def test_state_dict_restores_the_rng_state(build):
    model = Regression()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    state = executor.state_dict()
    first = torch.rand(3)
    executor.load_state_dict(state)
    torch.testing.assert_close(torch.rand(3), first)


def test_seed_makes_dropout_reproducible(build):
    class Dropped(Regression):
        def forward(self, x, y):  # type: ignore[override]
            prediction = torch.nn.functional.dropout(self.linear(x), 0.5, training=self.training)
            return {"prediction": prediction, "loss": torch.nn.functional.mse_loss(prediction, y)}

    results = []
    for _ in range(2):
        model = Dropped()
        executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), seed=7, device_iterations=2, output_mode="all")
        results.append(executor(regression_batch(8)).outputs["prediction"])
    torch.testing.assert_close(results[0], results[1])
