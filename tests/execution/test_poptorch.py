"""poptorch-only behaviour, against the stand-in module: option mapping, optimizers, IPU options."""

from __future__ import annotations

import builtins
import sys

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.execution import PoptorchExecutor, StepExecutor
from ipuflow.execution.ipu_config import resolve_placements
from ipuflow.training.optim.optimizers import Optimizer
from tests.execution import fake_poptorch
from tests.execution.executor_test_models import Regression, regression_batch
from tests.execution.torch_capabilities import needs_cpu_half_kernels


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)


class Stack(torch.nn.Module):
    """Four linear layers in a ModuleList, for placement tests."""

    def __init__(self, layers: int = 4) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(layers))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        for layer in self.layers:
            x = layer(x)
        return {"out": x, "loss": torch.nn.functional.mse_loss(x, y.expand_as(x))}


def test_poptorch_missing_is_a_configuration_error_naming_the_sdk(monkeypatch):
    monkeypatch.delitem(sys.modules, "poptorch")
    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "poptorch":
            raise ImportError("Unable to import PopTorch without an active Poplar SDK")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    model = Regression()
    with pytest.raises(ConfigurationError, match="Poplar SDK"):
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_importing_the_execution_package_does_not_import_poptorch():
    import subprocess

    code = "import sys, ipuflow.execution; assert 'poptorch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))


def test_training_options_map_as_ipuconfig_to_options_does():
    model = Regression()
    executor = PoptorchExecutor(
        model, torch.optim.SGD(model.parameters(), lr=0.1), device_iterations=4, gradient_accumulation=8,
        replication_factor=2, seed=0, executable_cache_dir="/tmp/cache", matmul_proportion=0.3,
        optimizer_state_offchip=True, replicated_tensor_sharding=True, auto_loss_scaling=True, precision="fp16",
    )
    options = executor.poptorch_options
    assert options.called("deviceIterations") == [(4,)]
    assert options.called("replicationFactor") == [(2,)]
    assert options.called("Training.gradientAccumulation") == [(8,)]
    assert options.called("Training.accumulationAndReplicationReductionType") == [(fake_poptorch.ReductionType.Mean,)]
    assert options.called("Training.setAutomaticLossScaling") == [(True,)]
    assert options.called("outputMode") == [(fake_poptorch.OutputMode.Final, None)]
    assert options.called("randomSeed") == [(0,)]  # seed 0 is a seed
    assert options.called("enableExecutableCaching") == [("/tmp/cache",)]
    assert options.called("setAvailableMemoryProportion") == [({"IPU0": 0.3},)]
    assert options.called("Precision.setPartialsType") == [(torch.half,)]
    assert options.called("Precision.enableStochasticRounding") == [(True,)]
    (settings,) = options.called("TensorLocations.setOptimizerLocation")[0]
    assert settings.on_chip is False and settings.replicated_tensor_sharding is True
    (strategy,) = options.called("setExecutionStrategy")[0]
    assert type(strategy) is fake_poptorch.PipelinedExecution and strategy.stages == (fake_poptorch.AutoStage.AutoIncrement,)
    assert model.linear.weight.dtype == torch.float16  # fp16 on IPU is a half model, as in optimum
    with pytest.raises(AttributeError, match="frozen"):
        options.deviceIterations(2)  # options are frozen once used, as poptorch's


def test_inference_options_use_the_inference_twins_sharded_execution_and_no_accumulation():
    model = Regression()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), gradient_accumulation=4, inference_device_iterations=5, inference_replication_factor=3, replicated_tensor_sharding=True)
    options = executor.inference_executor().poptorch_options
    assert options.called("deviceIterations") == [(5,)]
    assert options.called("replicationFactor") == [(3,)]
    assert options.called("Training.gradientAccumulation") == []
    assert options.called("outputMode") == [(fake_poptorch.OutputMode.All, None)]
    assert options.called("Precision.enableStochasticRounding") == []
    (strategy,) = options.called("setExecutionStrategy")[0]
    assert type(strategy) is fake_poptorch.ShardedExecution
    assert executor.inference_executor().batch_size_factor == 15


def test_every_n_passes_the_period():
    model = Regression()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device_iterations=4, output_mode="every_n", output_period=2)
    assert executor.poptorch_options.called("outputMode") == [(fake_poptorch.OutputMode.EveryN, 2)]


@pytest.mark.parametrize("optimizer_class, poptorch_name", [(torch.optim.SGD, "SGD"), (torch.optim.Adam, "Adam"), (torch.optim.AdamW, "AdamW"), (torch.optim.RMSprop, "RMSprop")])
def test_torch_optimizers_convert_to_poptorch_optim_keeping_hyperparameters(optimizer_class, poptorch_name):
    model = Regression()
    optimizer = optimizer_class([{"params": [model.linear.weight], "lr": 0.3}, {"params": [model.linear.bias], "weight_decay": 0.0}], lr=0.01)
    executor = PoptorchExecutor(model, optimizer, loss_scaling=128.0)
    device_optimizer = executor._device_optimizer
    assert type(device_optimizer) is getattr(fake_poptorch.optim, poptorch_name)
    assert device_optimizer.loss_scaling == 128.0
    assert [group["lr"] for group in device_optimizer.param_groups] == [0.3, 0.01]
    if "betas" in optimizer.defaults:
        assert device_optimizer.param_groups[0]["betas"] == optimizer.param_groups[0]["betas"]


def test_set_optimizer_sends_the_new_learning_rate_through_setoptimizer():
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    executor = PoptorchExecutor(model, optimizer)
    calls = executor.poplar_executor.set_optimizer_calls
    optimizer.param_groups[0]["lr"] = 0.05
    executor.set_optimizer(optimizer)
    assert executor.poplar_executor.set_optimizer_calls == calls + 1
    assert executor._device_optimizer.param_groups[0]["lr"] == 0.05


def test_an_unsupported_optimizer_is_a_configuration_error():
    model = Regression()
    with pytest.raises(ConfigurationError, match="Adagrad"):
        PoptorchExecutor(model, torch.optim.Adagrad(model.parameters(), lr=0.1))


REGISTERED_TWINS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop", "lamb": "LAMB"}


@needs_cpu_half_kernels
@pytest.mark.parametrize("name", sorted(REGISTERED_TWINS))
def test_every_registered_optimizer_with_a_twin_converts_with_groups_and_explicit_hyperparameters(name):
    # Every optimizer a config builds is a registered subclass (issue 10: they were looked up by exact type).
    model = Stack(layers=3)
    config = {"type": name, "lr": 0.01, "parameter_groups": [[["layers\\.0\\."], {"requires_grad": False}],
                                                            [["^layers\\.[12]\\.bias"], {"weight_decay": 0.0, "lr": 0.02}]]}
    optimizer = Optimizer.from_params(Params(config), model_parameters=list(model.named_parameters()))
    executor = PoptorchExecutor(model, optimizer, loss_scaling=64.0, precision="fp16")
    device = executor._device_optimizer
    assert type(device) is getattr(fake_poptorch.optim, REGISTERED_TWINS[name])
    assert [len(group["params"]) for group in device.param_groups] == [2, 2]  # layer 0 frozen and left out
    assert [group["lr"] for group in device.param_groups] == [0.02, 0.01]
    assert device.param_groups[0]["weight_decay"] == 0.0
    assert device.loss_scaling == 64.0
    # optimum-graphcore's create_optimizer: fp16 accumulators and first moment, fp32 second moment.
    assert device.accum_type == torch.float16
    if name != "sgd":
        assert device.first_order_momentum_accum_type == torch.float16 and device.second_order_momentum_accum_type == torch.float32
    # Every hyperparameter is passed explicitly, so a scheduler may change it through setOptimizer.
    assert all(not device.variable_attrs.isConstant(key) for key in device.defaults if key in ("lr", "momentum", "betas", "weight_decay"))
    executor({"x": torch.randn(2, 4), "y": torch.randn(2, 4)})


def test_lamb_keeps_bias_correction_and_max_weight_norm():
    model = Regression()
    optimizer = Optimizer.from_params(Params({"type": "lamb", "lr": 0.01, "bias_correction": False, "max_weight_norm": 3.0}),
                                      model_parameters=list(model.named_parameters()))
    device = PoptorchExecutor(model, optimizer)._device_optimizer
    assert device.bias_correction is False and device.param_groups[0]["max_weight_norm"] == 3.0


@pytest.mark.parametrize("name", ["rmsprop", "lamb"])
def test_max_grad_norm_with_an_optimizer_without_clipping_is_refused(name):
    model = Regression()
    optimizer = Optimizer.from_params(Params({"type": name}), model_parameters=list(model.named_parameters()))
    with pytest.raises(ConfigurationError, match="max_grad_norm"):
        PoptorchExecutor(model, optimizer, max_grad_norm=1.0)


def test_amsgrad_is_refused_as_poptorch_refuses_it():
    model = Regression()
    with pytest.raises(ConfigurationError, match="amsgrad"):
        PoptorchExecutor(model, torch.optim.Adam(model.parameters(), amsgrad=True))


@pytest.mark.parametrize("name", sorted(REGISTERED_TWINS))
def test_optimizer_state_resumes_exactly_through_poptorchs_own_format(name):
    def build(model):
        optimizer = Optimizer.from_params(Params({"type": name, "lr": 0.01}), model_parameters=list(model.named_parameters()))
        return PoptorchExecutor(model, optimizer, device_iterations=2)

    torch.manual_seed(0)
    model = Regression()
    executor = build(model)
    executor(regression_batch(4, seed=0))
    executor.copy_weights_to_host()
    state = executor.state_dict()
    assert state["poptorch_optimizer"]["ipu_state"] is not None, "the device state is read back in poptorch's format"
    assert state["poptorch_optimizer"]["ipu_state"] or name == "sgd"  # plain SGD has no state
    weights = {key: value.clone() for key, value in model.state_dict().items()}
    executor(regression_batch(4, seed=1))
    executor.copy_weights_to_host()
    expected = {key: value.clone() for key, value in model.state_dict().items()}

    resumed_model = Regression()
    resumed_model.load_state_dict(weights)
    resumed = build(resumed_model)
    resumed.load_state_dict(state)
    resumed(regression_batch(4, seed=1))
    resumed.copy_weights_to_host()
    for key, value in resumed_model.state_dict().items():
        assert torch.equal(value, expected[key]), key


class DropoutRegression(Regression):
    """The regression model with dropout on its inputs: each step draws masks from the device's generator."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor):  # type: ignore[override]
        return super().forward(self.dropout(x), y)


def test_the_device_rng_is_its_own_and_a_resume_restores_it():
    # Issue 34, point 2: poptorch keeps the device's random state apart from the host's
    # (PoplarExecutor.rng_state); a resumed run must draw the dropout masks the uninterrupted one drew.
    def build(model):
        return PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), seed=3)

    model = DropoutRegression()
    executor = build(model)
    executor(regression_batch(4, seed=0))
    executor.copy_weights_to_host()
    state = executor.state_dict()
    assert state["device_rng"]["seed"] == 3 and state["device_rng"]["state"].dtype == torch.int64
    weights = {key: value.clone() for key, value in model.state_dict().items()}
    host = torch.get_rng_state()
    executor(regression_batch(4, seed=1))
    assert torch.equal(torch.get_rng_state(), host), "a step draws nothing from the host's generator"
    executor.copy_weights_to_host()
    expected = {key: value.clone() for key, value in model.state_dict().items()}

    torch.manual_seed(12345)  # the host's generator, reseeded, does not reach the device
    resumed_model = DropoutRegression()
    resumed_model.load_state_dict(weights)
    resumed = build(resumed_model)
    resumed.load_state_dict(state)  # before compile: applied when it compiles, as poptorch's setter needs
    resumed(regression_batch(4, seed=1))
    resumed.copy_weights_to_host()
    for key, value in resumed_model.state_dict().items():
        assert torch.equal(value, expected[key]), key


def test_without_a_seed_the_device_is_seeded_from_the_hosts_seed_without_moving_the_host():
    # PopART seeds the device only when randomSeed is set (popart_compiler Compiler.cpp): the executor
    # always sets one, so that two runs with the same pytorch_seed draw the same masks.
    torch.manual_seed(7)
    model = Regression()
    host = torch.get_rng_state()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert executor.poptorch_options.random_seed == 7
    assert torch.equal(torch.get_rng_state(), host)


def test_the_stand_in_loads_only_poptorch_format_optimizer_state():
    model = Regression()
    optimizer = fake_poptorch.optim.Adam(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="Only IPU optimizer states"):
        optimizer.load_state_dict(torch.optim.Adam(model.parameters()).state_dict())


def test_a_native_checkpoint_resumes_on_poptorch_with_a_warning_that_the_moments_restart():
    model = Regression()
    native = torch.optim.Adam(model.parameters(), lr=0.1)
    model(**regression_batch(2))["loss"].backward()
    native.step()
    executor = PoptorchExecutor(model, torch.optim.Adam(model.parameters(), lr=0.1))
    with pytest.warns(UserWarning, match="restart from zero"):
        executor.load_state_dict({"optimizer": native.state_dict(), "rng": {}})


def test_the_trainer_refuses_an_optimizer_without_a_twin_from_the_config_alone():
    from ipuflow.experiment.train_model import check_executor_runs_optimizer

    for name in ("adagrad", "adadelta", "adamax", "sparse_adam"):
        with pytest.raises(ConfigurationError, match="'sgd', 'adam', 'adamw', 'rmsprop', 'lamb'"):
            check_executor_runs_optimizer({"executor": {"type": "poptorch"}, "optimizer": {"type": name}})
        check_executor_runs_optimizer({"executor": {"type": "native"}, "optimizer": {"type": name}})
    check_executor_runs_optimizer({"executor": {"type": "poptorch"}})  # the default adam has a twin
    with pytest.raises(ConfigurationError, match="max_grad_norm"):
        check_executor_runs_optimizer({"executor": {"type": "poptorch"}, "optimizer": {"type": "lamb"}, "grad_norm": 1.0})


def test_components_documents_every_poptorch_key():
    import subprocess

    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    listing = subprocess.run([sys.executable, "-m", "ipuflow", "components", "stepexecutor", "poptorch"], cwd=root,
                             capture_output=True, text=True, check=True).stdout
    lines = listing.split("config keys:\n")[1].split("injected by")[0].strip().splitlines()
    documented = {}
    for line in lines:
        name, _, rest = line.strip().partition(": ")
        documented[name] = rest.split("  ", 1)[1].strip() if "  " in rest else ""
    import inspect

    expected = {name for function in (StepExecutor.__init__, PoptorchExecutor.__init__)
                for name in inspect.signature(function).parameters} - {"self", "model", "optimizer", "training", "options"}
    assert set(documented) == expected
    assert not [name for name, doc in documented.items() if not doc], "keys without a doc"


def test_bf16_is_rejected_on_ipus():
    model = Regression()
    with pytest.raises(ConfigurationError, match="^precision: "):
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), precision="bf16")


def test_wrapping_the_same_model_twice_without_destroy_is_poptorchs_error():
    model = Regression()
    first = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="already been wrapped"):
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    first(regression_batch(2))
    first.destroy()
    PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_layers_are_placed_with_begin_block_from_layers_per_ipu():
    model = Stack(layers=6)
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), pipeline_layers="layers", layers_per_ipu=[-1, 2], gradient_accumulation=3, recompute_checkpoint_every_layer=True, matmul_proportion=[0.1, 0.2])
    executor.compile({"x": torch.randn(3, 4), "y": torch.randn(3, 4)})
    assert [layer.poptorch_block for layer in model.layers] == [("Layer0", 0), ("Layer1", 0), ("Layer2", 0), ("Layer3", 0), ("Layer4", 1), ("Layer5", 1)]
    assert executor.poptorch_options.called("setAvailableMemoryProportion") == [({"IPU0": 0.1, "IPU1": 0.2},)]
    assert len(executor._checkpoint_hooks) == 5


def test_several_ipus_without_pipeline_layers_is_a_configuration_error():
    model = Stack()
    with pytest.raises(ConfigurationError, match="^pipeline_layers: "):
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), layers_per_ipu=[2, 2])


@pytest.mark.parametrize(
    "layers_per_ipu, ipus, layers, expected",
    [([1, 2], None, 3, [0, 1, 1]), ([-1], None, 9, [0] * 9), ([-1], 2, 7, [0, 0, 0, 1, 1, 1, 1]), ([2, -1], None, 6, [0, 0, 1, 1, 1, 1]),
     ([-1, 2], None, 6, [0, 0, 0, 0, 1, 1]), ([-1, 2, -1, 2], None, 7, [0, 1, 1, 2, 2, 3, 3])],
)
def test_layer_placement_matches_ipuconfig(layers_per_ipu, ipus, layers, expected):
    placement, _ = resolve_placements(layers_per_ipu, None, ipus, None, 0.2, None, None, None)
    assert placement.layer_ipus(layers) == expected


@pytest.mark.parametrize("layers", [2, 4])
def test_a_layer_count_that_does_not_fit_is_a_configuration_error(layers):
    placement, _ = resolve_placements([1, 2], None, None, None, 0.2, None, None, None)
    with pytest.raises(ConfigurationError, match="correct number of layers"):
        placement.layer_ipus(layers)


def test_inference_defaults_follow_ipuconfig():
    training, inference = resolve_placements([1, 2, 3], None, None, None, 0.2, None, None, None)
    assert training.ipus_per_replica == 3 and inference.ipus_per_replica == 3
    _, inference = resolve_placements(None, None, 10, None, 0.2, None, None, None)
    assert inference.ipus_per_replica == 10
    _, inference = resolve_placements(None, [1, 2, 3], 10, None, 0.2, None, None, None)
    assert inference.ipus_per_replica == 3
    _, inference = resolve_placements([1, 2, 3, 4], [3, 7], None, None, [0.1, 0.2, 0.3, 0.4], None, None, None)
    assert inference.matmul_proportion == [0.2, 0.2]


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"matmul_proportion": [0.1, 0.2, 0.3, 0.4, 0.5], "layers_per_ipu": [1, 1, 1, 1]}, "matmul_proportion"),
        ({"layers_per_ipu": [1, 2, 3], "ipus_per_replica": 2}, "layers_per_ipu"),
        ({"layers_per_ipu": [-2]}, "layers_per_ipu"),
        ({"ipus_per_replica": 0}, "ipus_per_replica"),
        ({"embedding_serialization_factor": 0}, "embedding_serialization_factor"),
        ({"embedding_serialization_factor": 2}, "embedding_serialization_factor"),
        ({"replication_factor": 0}, "replication_factor"),
        ({"output_mode": "invalid"}, "output_mode"),
    ],
)
def test_ipu_options_are_validated_as_ipuconfig_validates_them(kwargs, key):
    model = Stack()
    with pytest.raises(ConfigurationError) as error:
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), pipeline_layers="layers", **kwargs)
    assert error.value.key == key  # relative to the section; the resolver adds where it sits


def test_built_from_config_with_the_model_and_optimizer_injected():
    model = Stack()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    executor = StepExecutor.from_params(
        Params({"type": "poptorch", "device_iterations": 2, "layers_per_ipu": [2, 2], "pipeline_layers": "layers", "gradient_accumulation": 3}),
        model=model, optimizer=optimizer, serialization_dir="unused",
    )
    assert isinstance(executor, PoptorchExecutor) and executor.batch_size_factor == 6


def test_the_stand_in_dataloader_combines_batches_and_drops_the_remainder():
    options = fake_poptorch.Options().deviceIterations(4)
    loader = fake_poptorch.DataLoader(options, torch.utils.data.TensorDataset(torch.arange(100)), batch_size=1)
    assert len(loader) == 25 and next(iter(loader))[0].tolist() == [0, 1, 2, 3]
    loader = fake_poptorch.DataLoader(fake_poptorch.Options().replicationFactor(3), torch.utils.data.TensorDataset(torch.arange(100)), batch_size=2)
    assert len(loader) == 16


def test_set_optimizer_with_a_new_optimizer_converts_it_and_keeps_training():
    model = Regression()
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1))
    executor(regression_batch(2))
    replacement = torch.optim.Adam(model.parameters(), lr=0.01)
    executor.set_optimizer(replacement)
    assert type(executor._device_optimizer) is fake_poptorch.optim.Adam
    executor(regression_batch(2))
    with pytest.raises(ConfigurationError, match="not the model's"):
        executor.set_optimizer(torch.optim.SGD(Regression().parameters(), lr=0.1))


class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 20)

    def forward(self, x: torch.Tensor) -> dict:
        return {"out": self.linear(x)}


@pytest.mark.parametrize("mode", ["All", "Default", "EveryN", "Final", "Sum"])
def test_the_stand_in_returns_outputs_as_poptorchs_batching_test_expects(mode):
    # poptorch tests/batching_test.py::test_inferenceAnchors: 10 device iterations of micro-batch 1.
    torch.manual_seed(42)
    model = _Linear()
    inputs = torch.randn([10, 1, 5, 6])
    native = model(inputs)["out"]
    options = fake_poptorch.Options().deviceIterations(10)
    if mode != "Default":
        options.outputMode(getattr(fake_poptorch.OutputMode, mode), 5 if mode == "EveryN" else None)
    out = fake_poptorch.inferenceModel(model, options)(x=inputs)["out"]
    assert out.dim() == 4
    if mode in ("All", "Default"):
        torch.testing.assert_close(out, native)
    elif mode == "EveryN":
        assert out.shape[0] == 2
        torch.testing.assert_close(out[0], native[4])
        torch.testing.assert_close(out[1], native[9])
    elif mode == "Final":
        torch.testing.assert_close(out, native[-1:])
    else:
        torch.testing.assert_close(out, native.sum(0, keepdim=True))


@pytest.mark.parametrize("mode, shape", [("All", (1000,)), ("EveryN", (50,)), ("Final", ()), ("Sum", ()), ("Default", ())])
def test_the_stand_in_returns_training_losses_as_poptorchs_batching_test_expects(mode, shape):
    # poptorch tests/batching_test.py::test_trainingAnchors: 1000 device iterations, period 20.
    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(10, 10)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict:
            out = self.linear(x)
            return {"out": out, "loss": torch.nn.functional.cross_entropy(out, y)}

    torch.manual_seed(42)
    options = fake_poptorch.Options().deviceIterations(1000)
    if mode != "Default":
        options.outputMode(getattr(fake_poptorch.OutputMode, mode), 20 if mode == "EveryN" else None)
    model = WithLoss()
    label = torch.randint(0, 10, [1]).expand([1000])
    outputs = fake_poptorch.trainingModel(model, options, fake_poptorch.optim.SGD(model.parameters(), lr=0.01))(
        x=torch.randn(1000, 10), y=label)
    assert tuple(outputs["loss"].shape) == shape
    if mode == "Sum":
        assert outputs["loss"] > 500.0
