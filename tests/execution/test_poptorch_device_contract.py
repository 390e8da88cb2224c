"""What a real IPU would do differently from a permissive stand-in (issue 21, findings 2, 3, 4, 6):
the mode each executable is traced in, the one loss poptorch differentiates, the IPUs each attached
executable holds, and the optimizer attributes `setOptimizer` insists on.

Each test runs the poptorch executor on the stand-in (tests/execution/fake_poptorch.py), which is as
strict as poptorch in these respects (its rules cite poptorch's sources); the stand-in's own rules are
checked here too, through poptorch's API."""

from __future__ import annotations

import copy
import sys
from typing import Dict

import pytest
import torch

from ipuflow.config import Params
from ipuflow.execution import PoptorchExecutor
from ipuflow.models.model import Model
from ipuflow.training.optim.optimizers import Optimizer
from tests.execution import fake_poptorch
from tests.execution.executor_test_models import Regression, regression_batch


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)


@pytest.fixture
def one_ipu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with one IPU: two executables cannot both hold it."""
    monkeypatch.setattr(fake_poptorch._IPU_POOL, "total", 1)


class ModeProbe(Regression):
    """The regression model plus an output saying whether its dropout ran in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(0.0)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        outputs = super().forward(self.dropout(x), y)
        return {**outputs, "dropout_training": torch.full((x.shape[0],), float(self.dropout.training))}


class PerRowLoss(Model):
    """Three classes from four features; the loss is as ipuflow's Classifier computes it: a per-row
    cross-entropy (`reduction="none"`) summed and divided by the row count."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(3, 4, generator=generator))
            self.linear.bias.copy_(torch.randn(3, generator=generator))

    def forward(self, x: torch.Tensor, label: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        logits = self.linear(x)
        per_row = torch.nn.functional.cross_entropy(logits, label, reduction="none")
        return {"logits": logits, "loss": per_row.sum() / label.numel()}


class ArithmeticLoss(Regression):
    """A loss written as arithmetic, with no torch loss function and no identity_loss."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        prediction = self.linear(x)
        return {"prediction": prediction, "loss": ((prediction - y) ** 2).mean()}


def _classification_batch(rows: int = 4) -> Dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return {"x": torch.randn(rows, 4, generator=generator), "label": torch.randint(0, 3, (rows,), generator=generator)}


def _one_sgd_step_on_the_host(model: torch.nn.Module, batch: Dict[str, torch.Tensor], lr: float) -> torch.Tensor:
    """The update native training makes: the reported loss differentiated, one SGD step."""
    loss = model(**batch)["loss"]
    loss.backward()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= lr * parameter.grad
    return loss.detach()


# -- finding 2: the mode each executable is traced in ----------------------------------------------


def test_the_training_executable_is_traced_in_train_mode_after_the_inference_twin_is_built():
    model = ModeProbe()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    inference = executor.inference_executor()  # built first, as the trainer builds it with a validation loader
    assert executor(regression_batch(2)).outputs["dropout_training"].eq(1).all()
    assert inference(regression_batch(2)).outputs["dropout_training"].eq(0).all()
    assert executor(regression_batch(2)).outputs["dropout_training"].eq(1).all()


def test_the_inference_executable_is_traced_in_eval_mode_when_compiled_before_training():
    model = ModeProbe()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    inference = executor.inference_executor()
    model.train()
    assert inference(regression_batch(2)).outputs["dropout_training"].eq(0).all()
    assert executor(regression_batch(2)).outputs["dropout_training"].eq(1).all()


def test_the_stand_in_traces_the_modes_the_modules_have_at_compile_and_never_changes_them():
    model = ModeProbe().eval()
    poplar = fake_poptorch.trainingModel(model, optimizer=fake_poptorch.optim.SGD(model.parameters(), lr=0.1))
    assert poplar(**regression_batch(2))["dropout_training"].eq(0).all()  # traced as the module was: eval
    model.train()  # the executable is compiled: changing the host module's mode changes nothing on the device
    assert poplar(**regression_batch(2))["dropout_training"].eq(0).all()
    assert model.dropout.training


# -- finding 3: the loss poptorch differentiates ---------------------------------------------------


def test_the_device_differentiates_the_loss_ipuflow_reports():
    model = PerRowLoss()
    reference = copy.deepcopy(model)
    batch = _classification_batch()
    expected_loss = _one_sgd_step_on_the_host(reference, batch, lr=0.5)
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.5))
    result = executor(batch)
    executor.copy_weights_to_host()
    assert torch.allclose(result.loss, expected_loss)
    for name, value in reference.state_dict().items():
        assert torch.allclose(model.state_dict()[name], value, atol=1e-6), name


def test_a_loss_written_as_arithmetic_is_marked_and_trained():
    model = ArithmeticLoss()
    reference = copy.deepcopy(model)
    expected_loss = _one_sgd_step_on_the_host(reference, regression_batch(2), lr=0.1)
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert torch.allclose(executor(regression_batch(2)).loss, expected_loss)
    executor.copy_weights_to_host()
    assert torch.allclose(model.linear.weight, reference.linear.weight, atol=1e-6)


def test_the_stand_in_refuses_a_graph_without_a_loss_as_poptorch_does():
    model = ArithmeticLoss()
    poplar = fake_poptorch.trainingModel(model, optimizer=fake_poptorch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="Couldn't find a loss in graph!"):
        poplar(**regression_batch(2))


class TwoLosses(Regression):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        prediction = self.linear(x)
        return {"first": fake_poptorch.identity_loss(prediction.abs(), reduction="mean"),
                "second": fake_poptorch.identity_loss((prediction - y) ** 2, reduction="mean")}


def test_the_stand_in_refuses_several_independent_losses_as_poptorch_does():
    model = TwoLosses()
    poplar = fake_poptorch.trainingModel(model, optimizer=fake_poptorch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="Multiple independent losses found in graph"):
        poplar(**regression_batch(2))


class AuxiliaryLoss(Regression):
    """The regression loss plus an auxiliary loss returned beside it (not added into it)."""

    def __init__(self, auxiliary: str) -> None:
        super().__init__()
        self.auxiliary = auxiliary

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        outputs = super().forward(x, y)
        prediction = self.linear(x)
        target = (y > 0).float()
        functional = torch.nn.functional
        auxiliary = {
            "binary_cross_entropy_with_logits": lambda: functional.binary_cross_entropy_with_logits(prediction, target),
            "smooth_l1_loss": lambda: functional.smooth_l1_loss(prediction, y),
            "soft_margin_loss": lambda: functional.soft_margin_loss(prediction, target * 2 - 1),
            "hinge_embedding_loss": lambda: functional.hinge_embedding_loss(prediction, target * 2 - 1),
            "margin_ranking_loss": lambda: functional.margin_ranking_loss(prediction, y, target * 2 - 1),
            "cosine_embedding_loss": lambda: functional.cosine_embedding_loss(prediction, y, target[:, 0] * 2 - 1),
            "triplet_margin_loss": lambda: functional.triplet_margin_loss(prediction, y, -y),
            "huber_loss": lambda: functional.huber_loss(prediction, y),
        }[self.auxiliary]()
        return {**outputs, "auxiliary": auxiliary}


# poptorch lowers these to loss nodes: scripts/PopAtenHandlers.py (AtenHandlers.gen.cpp) and
# poptorch/source/popart_canonicalization/LossOps.cpp.
LOWERED_AUXILIARY = ["binary_cross_entropy_with_logits", "smooth_l1_loss", "soft_margin_loss", "hinge_embedding_loss",
                     "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss"]


@pytest.mark.parametrize("auxiliary", LOWERED_AUXILIARY)
def test_an_auxiliary_loss_poptorch_lowers_is_a_second_independent_loss(auxiliary):
    # Issue 34, point 5: the stand-in knew 7 loss functions, so such a model trained on it and failed on poptorch.
    model = AuxiliaryLoss(auxiliary)
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match=r"^Multiple independent losses found in graph\. Graph must have one final "
                                           r"loss\. Wrap final graph loss in poptorch\.identityLoss\.$"):
        executor(regression_batch(2))


def test_a_loss_function_poptorch_does_not_lower_is_no_loss_node():
    # huber_loss has no handler in poptorch (it is not smooth_l1_loss there): no second loss.
    model = AuxiliaryLoss("huber_loss")
    PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))(regression_batch(2))


class DetachedAuxiliary(Regression):
    """A loss whose value reaches the reported loss only through `detach` (a use in poptorch's graph,
    which autograd does not see)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        outputs = super().forward(x, y)
        auxiliary = torch.nn.functional.l1_loss(self.linear(x), y)
        return {**outputs, "loss": outputs["loss"] + 0.0 * auxiliary.detach()}


def test_a_loss_used_by_the_final_loss_through_any_op_is_folded_as_poptorch_folds_it():
    # RemoveSurplusIdentityLosses.cpp follows every use of a loss node (traverseUseDef), detach included.
    model = DetachedAuxiliary()
    PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))(regression_batch(2))


def test_the_stand_in_differentiates_an_unreduced_loss_as_the_sum_of_its_elements():
    model = PerRowLoss()
    reference = copy.deepcopy(model)
    batch = _classification_batch()
    logits = reference.linear(batch["x"])
    torch.nn.functional.cross_entropy(logits, batch["label"], reduction="sum").backward()
    poplar = fake_poptorch.trainingModel(model, optimizer=fake_poptorch.optim.SGD(model.parameters(), lr=0.5))
    poplar(**batch)  # the per-row cross-entropy is the one independent loss; sum / count is no loss
    poplar.copyWeightsToHost()
    assert torch.allclose(model.linear.weight, reference.linear.weight - 0.5 * reference.linear.weight.grad, atol=1e-6)


def test_the_stand_in_folds_a_loss_used_by_a_final_identity_loss():
    class Marked(PerRowLoss):
        def forward(self, x: torch.Tensor, label: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
            outputs = super().forward(x, label)
            return {**outputs, "loss": fake_poptorch.identity_loss(outputs["loss"], reduction="none")}

    model = Marked()
    reference = copy.deepcopy(model)
    batch = _classification_batch()
    _one_sgd_step_on_the_host(reference, batch, lr=0.5)
    poplar = fake_poptorch.trainingModel(model, optimizer=fake_poptorch.optim.SGD(model.parameters(), lr=0.5))
    poplar(**batch)
    poplar.copyWeightsToHost()
    assert torch.allclose(model.linear.weight, reference.linear.weight, atol=1e-6)


# -- finding 4: one executable attached at a time --------------------------------------------------


def test_the_validation_executable_takes_the_ipus_from_the_training_one(one_ipu):
    model = Regression()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    inference = executor.inference_executor()
    executor(regression_batch(2))
    inference.compile(regression_batch(2))  # the trainer compiles validation after training, before the first step
    assert inference.is_attached and not executor.is_attached
    executor(regression_batch(2))
    assert executor.is_attached and not inference.is_attached
    inference(regression_batch(2))
    assert inference.is_attached and not executor.is_attached


def test_the_stand_in_keeps_ipu_accounting_and_fails_to_acquire_as_poptorch_does(one_ipu):
    first, second = Regression(), Regression()
    one = fake_poptorch.trainingModel(first, optimizer=fake_poptorch.optim.SGD(first.parameters(), lr=0.1))
    two = fake_poptorch.trainingModel(second, optimizer=fake_poptorch.optim.SGD(second.parameters(), lr=0.1))
    one(**regression_batch(2))
    with pytest.raises(RuntimeError, match=r"Failed to acquire 1 IPU\(s\)"):
        two(**regression_batch(2))
    one.detachFromDevice()
    two(**regression_batch(2))
    with pytest.raises(RuntimeError, match=r"Failed to acquire 1 IPU\(s\)"):
        one(**regression_batch(2))  # a call re-attaches, which needs the IPU back
    two.destroy()
    one(**regression_batch(2))
    assert one.isAttachedToDevice()


def test_the_stand_in_acquires_replicas_rounded_up_to_a_power_of_two(monkeypatch):
    monkeypatch.setattr(fake_poptorch._IPU_POOL, "total", 2)
    model = Regression()
    poplar = fake_poptorch.inferenceModel(model, fake_poptorch.Options().replicationFactor(3))
    with pytest.raises(RuntimeError, match=r"Failed to acquire 4 IPU\(s\)"):
        poplar(**regression_batch(6))


# -- finding 6: lamb's defaults and the attributes setOptimizer needs ------------------------------


def test_lamb_at_its_defaults_takes_new_hyperparameters_on_the_ipu():
    model = Regression()
    optimizer = Optimizer.from_params(Params({"type": "lamb"}), model_parameters=list(model.named_parameters()))
    executor = PoptorchExecutor(model, optimizer)
    executor(regression_batch(2))
    optimizer.param_groups[0]["lr"] = 0.0005
    executor.set_optimizer(optimizer)
    executor(regression_batch(2))
    assert executor._device_optimizer.param_groups[0]["max_weight_norm"] == 65500.0


def test_lamb_defaults_to_poptorchs_max_weight_norm_so_both_backends_clip_alike():
    model = Regression()
    optimizer = Optimizer.from_params(Params({"type": "lamb"}), model_parameters=list(model.named_parameters()))
    assert optimizer.defaults["max_weight_norm"] == 65500.0


def test_lamb_with_max_weight_norm_null_runs_on_poptorch_as_its_default():
    model = Regression()
    optimizer = Optimizer.from_params(Params({"type": "lamb", "max_weight_norm": None}),
                                      model_parameters=list(model.named_parameters()))
    executor = PoptorchExecutor(model, optimizer)
    executor(regression_batch(2))
    executor.set_optimizer(optimizer)
    assert executor._device_optimizer.param_groups[0]["max_weight_norm"] == 65500.0


def test_the_stand_in_refuses_a_missing_mandatory_group_attribute_as_poptorch_does():
    model = Regression()
    optimizer = fake_poptorch.optim.LAMB(model.parameters(), lr=0.01)
    poplar = fake_poptorch.trainingModel(model, optimizer=optimizer)
    optimizer.param_groups[0]["max_weight_norm"] = None
    with pytest.raises(AssertionError, match="Mandatory attribute max_weight_norm not found in optimizer group"):
        poplar.setOptimizer(optimizer)


def _adam_run(replace: bool) -> torch.Tensor:
    model = Regression()
    optimizer = fake_poptorch.optim.Adam(model.parameters(), lr=0.05)
    poplar = fake_poptorch.trainingModel(model, optimizer=optimizer)
    poplar(**regression_batch(2, seed=1))
    if replace:
        poplar.setOptimizer(fake_poptorch.optim.Adam(model.parameters(), lr=0.05))
    poplar(**regression_batch(2, seed=2))
    poplar.copyWeightsToHost()
    return model.linear.weight.detach().clone()


def test_the_stand_in_keeps_the_device_moments_when_setoptimizer_gets_a_new_optimizer():
    assert torch.equal(_adam_run(replace=True), _adam_run(replace=False))


def test_a_new_host_optimizer_continues_from_the_moments_on_the_ipu():
    def run(replace: bool) -> torch.Tensor:
        model = Regression()
        executor = PoptorchExecutor(model, torch.optim.Adam(model.parameters(), lr=0.05))
        executor(regression_batch(2, seed=1))
        if replace:
            executor.set_optimizer(torch.optim.Adam(model.parameters(), lr=0.05))
        executor(regression_batch(2, seed=2))
        executor.copy_weights_to_host()
        return model.linear.weight.detach().clone()

    assert torch.equal(run(replace=True), run(replace=False))


# -- through the CLI ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_ipuflow_train_with_validation_runs_on_a_machine_with_only_the_ipus_one_executable_needs(tmp_path, monkeypatch):
    from tests.execution.test_poptorch_cli import train

    monkeypatch.setenv("IPUFLOW_STAND_IN_IPUS", "1")  # the stand-in in the `ipuflow` process has one IPU
    metrics = train("digits_mlp", tmp_path / "run", {"trainer.num_epochs": 2}, poptorch=True)
    assert metrics["epoch"] == 1 and "best_validation_accuracy" in metrics


@pytest.mark.slow
def test_ipuflow_train_with_lamb_at_its_defaults_reaches_natives_accuracy_on_poptorch(tmp_path):
    from tests.execution.test_poptorch_cli import train

    overrides = {"trainer.optimizer": {"type": "lamb"}}  # every LAMB argument at its default
    native = train("digits_mlp", tmp_path / "native", overrides, poptorch=False)
    ipu = train("digits_mlp", tmp_path / "poptorch", overrides, poptorch=True)
    assert abs(native["best_validation_accuracy"] - ipu["best_validation_accuracy"]) <= 0.01
