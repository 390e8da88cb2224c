"""The stand-in and the executor checked against poptorch's API as recorded from its sources
(tests/execution/poptorch_api.py).

* The stand-in's public surface is poptorch's: every recorded callable exists in it with the recorded
  parameters (names, kinds, defaults), and everything public it defines is recorded.
* The executor calls only recorded callables, with arguments their recorded signatures accept:
  `poptorch` is replaced by a module holding only the recorded names, whose callables bind every
  call against the recorded `inspect.Signature` before running the stand-in.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Callable, Dict, List, Set, Tuple

import pytest
import torch

from ipuflow.execution import PoptorchExecutor
from tests.execution import fake_poptorch, poptorch_api
from tests.execution.executor_test_models import Regression, regression_batch
from tests.execution.torch_capabilities import needs_cpu_half_kernels

TEST_HELPERS = {"Options.called"}
"""Public names of the stand-in that are test helpers, not poptorch API."""

BUILT_BY_POPTORCH = {"PoplarExecutor.__init__", "options._TrainingOptions.__init__", "options._PrecisionOptions.__init__",
                     "options._TensorLocationOptions.__init__", "TensorLocationSettings.__init__"}
"""Constructors only poptorch itself calls (trainingModel builds the PoplarExecutor, Options builds its
option groups; TensorLocationSettings() takes no argument); their internal signatures are not API."""


def recorded_signature(name: str) -> inspect.Signature:
    text, _ = poptorch_api.SIGNATURES[name]
    namespace: Dict[str, Any] = {}
    exec(f"def recorded{text}: pass", {}, namespace)  # noqa: S102 (our own recorded data)
    return inspect.signature(namespace["recorded"])


def _owner_and_attribute(name: str) -> Tuple[Any, str]:
    """The stand-in object holding the recorded `name`'s last part (poptorch sub-modules flattened)."""
    parts = name.split(".")
    if parts[0] == "options":
        parts = parts[1:]
    owner: Any = fake_poptorch
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1]


def stand_in(name: str) -> Any:
    owner, attribute = _owner_and_attribute(name)
    return inspect.getattr_static(owner, attribute) if isinstance(owner, type) else getattr(owner, attribute)


def _parameters(signature: inspect.Signature) -> List[Tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", sorted(poptorch_api.SIGNATURES))
def test_the_stand_in_has_every_recorded_callable_with_the_recorded_signature(name):
    function = stand_in(name)
    assert callable(function), name
    actual = _parameters(inspect.signature(function))
    expected = _parameters(recorded_signature(name))
    assert [(n, k) for n, k, _ in actual] == [(n, k) for n, k, _ in expected], name
    for (parameter, _, default), (_, _, recorded) in zip(actual, expected):
        assert default == recorded or (default is inspect.Parameter.empty) == (recorded is inspect.Parameter.empty) and default == recorded, (name, parameter)


def test_the_stand_in_has_the_recorded_properties_enums_and_class_hierarchy():
    for name in poptorch_api.PROPERTIES:
        assert isinstance(stand_in(name), property), name
    for name, members in poptorch_api.ENUMS.items():
        assert {member.name: member.value for member in getattr(fake_poptorch, name)} == members
    for name, (base, _) in poptorch_api.SUBCLASSES.items():
        assert issubclass(stand_in(name), stand_in(base)), name


def _public_stand_in_names() -> Set[str]:
    """Every public callable the stand-in defines: module functions, classes and their own methods."""
    names: Set[str] = set()

    def visit_class(prefix: str, cls: type) -> None:
        for attribute, value in vars(cls).items():
            if isinstance(value, type) and value.__module__ == fake_poptorch.__name__:
                if value.__qualname__.startswith(cls.__qualname__ + "."):
                    visit_class(f"{prefix}{attribute}.", value)  # a class defined inside (optim.SGD)
                continue
            public = not attribute.startswith("_") or attribute in ("__init__", "__call__")
            if getattr(value, "hooked", False):
                continue  # torch.optim.Optimizer patches `step` onto the first subclass instantiated
            if public and (inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod))):
                names.add(prefix + attribute)

    for attribute, value in vars(fake_poptorch).items():
        if getattr(value, "__module__", None) != fake_poptorch.__name__:
            continue
        if inspect.isfunction(value) and not attribute.startswith("_"):
            names.add(attribute)
        elif isinstance(value, type) and not issubclass(value, __import__("enum").Enum):
            prefix = f"options.{attribute}." if attribute.startswith("_") and attribute.endswith("Options") else f"{attribute}."
            if attribute.startswith("_") and prefix.startswith(attribute):
                continue  # private helpers (_Recorder, _PoptorchOptimizer seen as optim.Optimizer)
            visit_class(prefix, value)
    names |= {"optim.Optimizer." + attribute for attribute, value in vars(fake_poptorch.optim.Optimizer).items()
              if inspect.isfunction(value) and not attribute.startswith("_")}
    return names


def test_everything_public_in_the_stand_in_is_recorded_poptorch_api():
    unrecorded = _public_stand_in_names() - set(poptorch_api.SIGNATURES) - TEST_HELPERS - BUILT_BY_POPTORCH
    assert not unrecorded, f"the stand-in defines public callables poptorch does not have (or that are not recorded): {sorted(unrecorded)}"


class CheckedPoptorch:
    """Installs, as `poptorch`, a module holding only the recorded names, whose recorded callables
    check every call against the recorded signature; records which ipuflow called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.called_by_ipuflow: Set[str] = set()
        module = types.ModuleType("poptorch")
        top_level = {name.split(".")[0] for name in [*poptorch_api.SIGNATURES, *poptorch_api.PROPERTIES, *poptorch_api.SUBCLASSES]}
        top_level |= set(poptorch_api.ENUMS)
        for name in sorted(top_level - {"options"}):
            setattr(module, name, getattr(fake_poptorch, name))
        for name in poptorch_api.SIGNATURES:
            owner, attribute = _owner_and_attribute(name)
            original = inspect.getattr_static(owner, attribute) if isinstance(owner, type) else getattr(owner, attribute)
            checked = self._checked(name, original)
            if owner is fake_poptorch:
                setattr(module, attribute, checked)
            else:
                monkeypatch.setattr(owner, attribute, checked)
        monkeypatch.setitem(sys.modules, "poptorch", module)

    def _checked(self, name: str, function: Callable) -> Callable:
        signature = recorded_signature(name)
        calls = self.called_by_ipuflow

        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                signature.bind(*args, **kwargs)
            except TypeError as error:
                raise AssertionError(f"poptorch's {name}{signature} does not accept this call: {error}") from None
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("ipuflow"):
                calls.add(name)
            return function(*args, **kwargs)

        checked.__signature__ = signature  # type: ignore[attr-defined]
        return checked


def _exercise_the_executor() -> None:
    """Every path of the poptorch executor: each optimizer, every option, state, attach, destroy."""
    from tests.execution.test_poptorch import Stack

    for optimizer_class in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop):
        model = Regression()
        optimizer = optimizer_class([{"params": [model.linear.weight], "lr": 0.02}, {"params": [model.linear.bias]}], lr=0.01)
        executor = PoptorchExecutor(model, optimizer, device_iterations=2, gradient_accumulation=2, replication_factor=2,
                                    seed=3, loss_scaling=16.0, auto_loss_scaling=True, executable_cache_dir="/tmp/unused",
                                    optimizer_state_offchip=True, replicated_tensor_sharding=True,
                                    max_grad_norm=None if optimizer_class is torch.optim.RMSprop else 1.0)
        executor(regression_batch(16))
        optimizer.param_groups[0]["lr"] = 0.005
        executor.set_optimizer(optimizer)
        state = executor.state_dict()
        executor.detach()
        assert not executor.is_attached
        executor.attach()
        executor.load_state_dict(state)
        executor.copy_weights_to_host()
        executor.copy_weights_to_device()
        inference = executor.inference_executor()
        inference(regression_batch(4))
        executor.destroy()
    from ipuflow.training.optim.optimizers import LambOptimizer

    model = Stack(layers=4)
    optimizer = LambOptimizer(list(model.named_parameters()), lr=0.01)
    executor = PoptorchExecutor(model, optimizer, pipeline_layers="layers", layers_per_ipu=[2, 2], gradient_accumulation=3,
                                recompute_checkpoint_every_layer=True, precision="fp16", output_mode="every_n",
                                output_period=2, device_iterations=2)
    executor({"x": torch.randn(12, 4), "y": torch.randn(12, 4)})
    executor.inference_executor()({"x": torch.randn(4, 4), "y": torch.randn(4, 4)})
    model = Regression()  # --compile-only: an offline IPU target
    offline = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), compile_only=True, offline_ipu_version=21)
    offline.compile(regression_batch(2))


@needs_cpu_half_kernels  # the exercise includes a half model
def test_the_executor_calls_only_recorded_poptorch_api_with_accepted_arguments(monkeypatch):
    checked = CheckedPoptorch(monkeypatch)
    _exercise_the_executor()
    called = checked.called_by_ipuflow
    assert (sorted(called - poptorch_api.EXECUTOR_USES), sorted(poptorch_api.EXECUTOR_USES - called)) == ([], [])


def test_the_check_catches_a_call_poptorch_would_not_accept(monkeypatch):
    CheckedPoptorch(monkeypatch)
    poptorch = sys.modules["poptorch"]
    with pytest.raises(AssertionError, match="does not accept"):
        poptorch.Options().deviceIterations(count=2)  # poptorch's parameter is device_iterations
    with pytest.raises(AttributeError):
        poptorch.Options().Training.setGradientAccumulation(2)  # no such setter
    assert not hasattr(poptorch, "serializedMatMul")  # not recorded, so not there for the executor
