"""The native executor's hyperparameters: the `set_optimizer` snapshot holds for every update of a
host call (as on poptorch), and values the optimizer maintains in its param groups are its own."""

from __future__ import annotations

from typing import Any, List

import pytest
import torch

from ipuflow.execution import NativeExecutor
from tests.execution.executor_test_models import Regression, regression_batch


def _recording_lr(optimizer: torch.optim.Optimizer) -> List[float]:
    """The lr of group 0 as each optimizer step starts (a step pre-hook, so it is the lr used)."""
    used: List[float] = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(float(opt.param_groups[0]["lr"])))
    return used


def test_a_step_hook_changing_the_lr_does_not_change_it_within_a_call():
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    used = _recording_lr(optimizer)

    def halve(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group in opt.param_groups:
            group["lr"] *= 0.5

    optimizer.register_step_post_hook(halve)
    executor = NativeExecutor(model, optimizer, device="cpu", device_iterations=4)
    executor(regression_batch(8))
    assert used == [0.1, 0.1, 0.1, 0.1]
    executor(regression_batch(8, seed=2))
    # Without set_optimizer the device keeps the snapshot...
    assert used[4:] == [0.1, 0.1, 0.1, 0.1]
    # ...and the host object keeps what the hook wrote, for the next set_optimizer to send.
    assert optimizer.param_groups[0]["lr"] == 0.05
    executor.set_optimizer(optimizer)
    executor(regression_batch(8, seed=3))
    assert used[8:] == [0.05, 0.05, 0.05, 0.05]


class SelfDecayingSGD(torch.optim.Optimizer):
    """Plain SGD whose step decays its own lr and counts its updates in the param group (as
    schedule-free and D-Adaptation optimizers keep running values in their groups)."""

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, {"lr": lr, "k": 0})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.add_(parameter.grad, alpha=-group["lr"])
            group["k"] += 1
            group["lr"] *= 0.5
        return None


def test_an_optimizer_changing_its_own_lr_keeps_the_snapshot_within_a_call_and_its_running_values():
    model = Regression()
    optimizer = SelfDecayingSGD(model.parameters(), lr=0.1)
    used = _recording_lr(optimizer)
    executor = NativeExecutor(model, optimizer, device="cpu", device_iterations=3)
    executor(regression_batch(6))
    assert used == [0.1, 0.1, 0.1]
    # The running count is the optimizer's: three updates, not put back to 0 after the call.
    assert optimizer.param_groups[0]["k"] == 3
    executor(regression_batch(6, seed=2))
    assert optimizer.param_groups[0]["k"] == 6
    executor.set_optimizer(optimizer)
    executor(regression_batch(6, seed=3))
    assert optimizer.param_groups[0]["k"] == 9
    assert used[6:] == [0.05, 0.05, 0.05]


def test_host_changes_wait_for_set_optimizer_and_are_not_lost():
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    used = _recording_lr(optimizer)
    executor = NativeExecutor(model, optimizer, device="cpu", device_iterations=2)
    optimizer.param_groups[0]["lr"] = 0.3  # a scheduler on the host, not yet sent
    executor(regression_batch(4))
    assert used == [0.1, 0.1]
    assert optimizer.param_groups[0]["lr"] == 0.3  # the host value is still there
    executor.set_optimizer(optimizer)
    executor(regression_batch(4, seed=2))
    assert used[2:] == [0.3, 0.3]


def test_a_tensor_lr_changed_in_place_during_a_call_leaves_the_snapshot_intact():
    model = Regression()
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01), foreach=False)
    used = _recording_lr(optimizer)
    optimizer.register_step_post_hook(lambda opt, args, kwargs: opt.param_groups[0]["lr"].mul_(0.5))
    executor = NativeExecutor(model, optimizer, device="cpu", device_iterations=3)
    executor(regression_batch(6))
    executor(regression_batch(6, seed=2))
    assert [float(lr) for lr in used] == pytest.approx([0.01] * 6)
    assert float(executor.state_dict()["hyperparameters"][0]["lr"]) == pytest.approx(0.01)
