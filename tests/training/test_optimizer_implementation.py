"""Issue 32: every optimizer runs the fastest implementation of its update torch has (fused, else
foreach, else single-tensor), which the config's `fused`/`foreach` keys can force, and the
implementations do the same training."""

import copy
from types import SimpleNamespace
from typing import Dict, List

import pytest
import torch

import ipuflow.execution.native  # noqa: F401  (registers the native executor)
from ipuflow import torch_features
from ipuflow.config import ConfigurationError, Params
from ipuflow.training import Optimizer, Trainer, TrainerCallback
from ipuflow.training.optim.implementation import choose_implementation
from tests.training.regression import LinearRegression, loaders

FUSED_ON_CPU = torch_features.torch_at_least(torch_features.FUSED_OPTIMIZERS_ON_CPU)

# torch's own test of its fused optimizers against the single-tensor loop (test_optim.py,
# test_fused_matches_forloop) compares with its default float32 tolerances: the fused kernel
# computes the same update but rounds in another order (it folds the bias corrections and the step
# size into one expression), so values differ by a few units in the last place per update.
FLOAT32_TOLERANCE = {"rtol": 1.3e-6, "atol": 1e-5}


def build(config: Dict, model: torch.nn.Module) -> Optimizer:
    return Optimizer.from_params(Params(config, history="trainer.optimizer."),
                                 model_parameters=list(model.named_parameters()))


def flags(optimizer: torch.optim.Optimizer) -> List:
    return [(group.get("fused"), group.get("foreach")) for group in optimizer.param_groups]


@pytest.mark.parametrize("name, expected", [
    ("adam", "fused"), ("adamw", "fused"), ("huggingface_adamw", "fused"), ("sgd", "fused"), ("adagrad", "fused"),
    ("rmsprop", "foreach"), ("adadelta", "foreach"), ("adamax", "foreach"), ("lamb", "own step"),
    ("sparse_adam", "own step"),
])
def test_each_optimizer_runs_the_fastest_implementation_torch_has_on_the_cpu(name, expected):
    config = {"type": name, "lr": 0.1} if name == "sgd" else {"type": name}
    optimizer = build(config, torch.nn.Linear(3, 2))
    if expected == "fused" and not FUSED_ON_CPU:
        expected = "foreach"
    assert optimizer.implementation.name == expected and optimizer.implementation.automatic
    for group in optimizer.param_groups if expected != "own step" else []:  # what torch's step reads
        assert group["foreach"] is (expected == "foreach") and group.get("fused", False) is (expected == "fused")


def test_false_keys_force_the_single_tensor_loop_and_sgd_with_momentum_avoids_fused():
    model = torch.nn.Linear(3, 2)
    single = build({"type": "adamw", "fused": False, "foreach": False}, model)
    assert single.implementation.name == "single-tensor" and not single.implementation.automatic
    assert flags(single) == [(False, False)] * len(single.param_groups)
    assert not getattr(single, "_step_supports_amp_scaling", False)
    # Fused SGD's first update leaves its momentum buffers uninitialised when a loss scaler skips it.
    momentum = build({"type": "sgd", "lr": 0.1, "momentum": 0.9}, model)
    assert momentum.implementation.name == "foreach"
    assert "momentum" in momentum.implementation.describe()
    assert build({"type": "sgd", "lr": 0.1, "momentum": 0.9, "fused": True}, model).implementation.name == "fused" \
        or not FUSED_ON_CPU


def cuda_parameters() -> List[Dict]:
    # The capability check reads only device, dtype and layout: a stand-in for a CUDA parameter
    # lets a CPU-only machine check the rules for CUDA.
    return [{"params": [SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.float32, layout=torch.strided)]}]


def test_the_capability_check_follows_torch_2_0_which_has_fused_adam_only_on_cuda():
    cpu_groups = [{"params": list(torch.nn.Linear(3, 2).parameters())}]
    both, foreach_only = frozenset({"fused", "foreach"}), frozenset({"foreach"})  # 2.0.1's Adam / SGD take these
    old = dict(release=(2, 0))
    chosen = choose_implementation(torch.optim.AdamW, cpu_groups, None, None, accepted=both, **old)
    assert chosen.name == "foreach" and "needs torch>=2.4; this is torch 2.0" in chosen.why_not_fused
    assert choose_implementation(torch.optim.AdamW, cuda_parameters(), None, None, accepted=both, **old).name == "fused"
    sgd = choose_implementation(torch.optim.SGD, cuda_parameters(), None, None, accepted=foreach_only, **old)
    assert sgd.name == "foreach" and sgd.why_not_fused == "torch 2.0 has no fused SGD"
    assert choose_implementation(torch.optim.SGD, cuda_parameters(), None, None, accepted=both,
                                 release=(2, 3)).name == "fused"
    # Adagrad: ipuflow fuses it on the CPU only.
    assert choose_implementation(torch.optim.Adagrad, cuda_parameters(), None, None, accepted=both,
                                 release=(2, 13)).name == "foreach"
    with pytest.raises(ConfigurationError, match=r"fused AdamW for cpu parameters needs torch>=2.4; this is torch 2.0"):
        choose_implementation(torch.optim.AdamW, cpu_groups, True, None, accepted=both, **old)
    integer = [{"params": [SimpleNamespace(device=torch.device("cpu"), dtype=torch.int64, layout=torch.strided)]}]
    with pytest.raises(ConfigurationError, match="floating-point parameters, not torch.int64"):
        choose_implementation(torch.optim.Adam, integer, True, None, accepted=both, release=(2, 13))


def test_a_forced_fused_update_torch_cannot_do_is_a_config_error_naming_the_key(monkeypatch):
    monkeypatch.setattr(torch_features, "TORCH_RELEASE", (2, 0))  # as on the torch 2.0.1 CI leg: no fused CPU kernels
    with pytest.raises(ConfigurationError) as raised:
        build({"type": "adamw", "fused": True}, torch.nn.Linear(3, 2))
    assert raised.value.message.startswith("trainer.optimizer.fused: true asks for torch's fused implementation, but "
                                           "fused AdamW for cpu parameters needs torch>=2.4")
    assert build({"type": "adamw"}, torch.nn.Linear(3, 2)).implementation.name == "foreach"


RECORDED: List[Dict[str, torch.Tensor]] = []


@TrainerCallback.register("test_implementation_weights", exist_ok=True)
class WeightsAfterEachUpdate(TrainerCallback):
    def on_step_end(self, event) -> None:
        RECORDED.append({name: value.detach().clone() for name, value in event.trainer.model.state_dict().items()})


def train(tmp_path, name: str, initial: Dict, optimizer: Dict, executor: Dict) -> List[Dict[str, torch.Tensor]]:
    RECORDED.clear()
    model = LinearRegression(num_features=4)
    model.load_state_dict(initial)
    train_loader, _ = loaders(train=48, batch_size=4, shuffle=False)
    trainer = Trainer.from_params(
        Params({"num_epochs": 2, "optimizer": optimizer, "checkpointer": None, "enable_default_callbacks": False,
                "executor": {"type": "native", "device": "cpu", **executor},
                "callbacks": [{"type": "test_implementation_weights"}]}),
        model=model, serialization_dir=str(tmp_path / name), data_loader=train_loader)
    trainer.train()
    return list(RECORDED)


def assert_same_training(first: List[Dict[str, torch.Tensor]], second: List[Dict[str, torch.Tensor]]) -> None:
    assert len(first) == len(second) == 24
    for update, (a, b) in enumerate(zip(first, second), 1):
        for name in a:
            torch.testing.assert_close(a[name], b[name], **FLOAT32_TOLERANCE, msg=f"{name} after update {update}")


@pytest.mark.skipif(not FUSED_ON_CPU, reason="torch before 2.4 has no fused optimizers on the CPU")
def test_a_fused_and_a_single_tensor_run_do_the_same_training(tmp_path):
    torch.manual_seed(0)
    initial = copy.deepcopy(LinearRegression(num_features=4).state_dict())
    adamw = {"type": "adamw", "lr": 0.05, "weight_decay": 0.1}
    executor = {"max_grad_norm": 0.5}
    fused = train(tmp_path, "fused", initial, {**adamw, "fused": True}, executor)
    single = train(tmp_path, "single", initial, {**adamw, "fused": False, "foreach": False}, executor)
    foreach = train(tmp_path, "foreach", initial, {**adamw, "fused": False, "foreach": True}, executor)
    assert_same_training(fused, single)
    assert_same_training(foreach, single)
    assert not torch.equal(fused[-1]["linear.weight"], initial["linear.weight"])


@pytest.mark.skipif(not FUSED_ON_CPU or not torch_features.torch_at_least(torch_features.CPU_GRAD_SCALER),
                    reason="needs fused optimizers and the loss scaler on the CPU (torch>=2.4)")
def test_dynamic_loss_scaling_skips_overflowed_updates_alike_with_the_fused_update(tmp_path):
    # Large weights (a loss near 1e6) under a loss scale of 2^120 overflow float32 gradients: the
    # first updates are skipped (the fused kernel reads the overflow flag itself, the others are not
    # called) while the scaler halves the scale, and both implementations train alike after.
    torch.manual_seed(0)
    initial = copy.deepcopy(LinearRegression(num_features=4).state_dict())
    initial["linear.weight"] = initial["linear.weight"] * 1000
    executor = {"auto_loss_scaling": True, "loss_scaling": 2.0 ** 120}
    # SGD with momentum: the automatic choice (foreach), since torch's fused SGD reads uninitialised
    # momentum buffers after a skipped first update (forced fused, this test sees it diverge).
    for optimizer, automatic in (({"type": "adamw", "lr": 0.05}, {"fused": True}),
                                 ({"type": "sgd", "lr": 1e-4, "momentum": 0.9, "dampening": 0.5}, {})):
        chosen = train(tmp_path, "chosen", initial, {**optimizer, **automatic}, executor)
        single = train(tmp_path, "single", initial, {**optimizer, "fused": False, "foreach": False}, executor)
        for run in (chosen, single):
            assert torch.equal(run[0]["linear.weight"], initial["linear.weight"])  # the overflowed first update
            assert not torch.equal(run[-1]["linear.weight"], initial["linear.weight"])
        assert_same_training(chosen, single)


def test_a_checkpoint_of_one_implementation_resumes_with_another(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    inputs, targets = torch.randn(6, 16, 4), torch.randn(6, 16, 1)
    start = copy.deepcopy(model.state_dict())

    def steps(optimizer, first, last):
        for index in range(first, last):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs[index]), targets[index]).backward()
            optimizer.step()

    implementations = [{"fused": False, "foreach": False}, {"fused": False, "foreach": True}]
    if FUSED_ON_CPU:
        implementations.append({"fused": True})
    for saved_with in implementations:
        for resumed_with in implementations:
            model.load_state_dict(start)
            uninterrupted = build({"type": "adam", "lr": 0.01, **saved_with}, model)
            steps(uninterrupted, 0, 6)
            expected = copy.deepcopy(model.state_dict())

            model.load_state_dict(start)
            first = build({"type": "adam", "lr": 0.01, **saved_with}, model)
            steps(first, 0, 3)
            torch.save(first.state_dict(), tmp_path / "training_state.pt")
            second = build({"type": "adam", "lr": 0.01, **resumed_with}, model)
            second.load_state_dict(torch.load(tmp_path / "training_state.pt", weights_only=True))
            # torch would take the saved groups' switches; the resumed optimizer keeps its own.
            assert second.implementation.name == build({"type": "adam", **resumed_with}, model).implementation.name
            assert flags(second) == [(resumed_with.get("fused", False), resumed_with.get("foreach", False))]
            steps(second, 3, 6)
            for name, value in model.state_dict().items():
                torch.testing.assert_close(value, expected[name], **FLOAT32_TOLERANCE)
