"""A stand-in for the `poptorch` module, for tests only: tests put it in ``sys.modules["poptorch"]``
(or, for `ipuflow` subprocesses, put tests/poptorch_stand_in on PYTHONPATH).

Its public surface is poptorch's, as recorded from graphcore/poptorch's sources in
tests/execution/poptorch_api.py (test_poptorch_api.py checks names, signatures and enums). It runs on
the CPU, written independently of the native executor so that the contract tests check one against
the other:

* `Options` records every setter call, makes poptorch's argument checks, and freezes once used;
* `trainingModel`/`inferenceModel` return a `PoplarExecutor` holding its own "device" copy of the
  weights and optimizer state (host weights are stale until `copyWeightsToHost`), checking the
  batch dimension, splitting ``[device_iteration][accumulation][replica][micro_batch]``, doing one
  update per device iteration with Mean reduction, and returning outputs by output mode (as
  poptorch's tests/batching_test.py expects);
* `optim.*` take poptorch's arguments, keep its global attributes (`loss_scaling`, `max_grad_norm`,
  accumulation dtypes, ...) and its optimizer-state format (``ipu_state``/``ipu_param``);
* a half model keeps fp16 weights (no master copy) and its optimizer state in the accumulation dtypes;
* `DataLoader` batches by the combined batch size and drops the remainder by default.

Where the stand-in refuses what poptorch refuses, it follows these sources (graphcore/poptorch at
c2a8b177, the SDK 3.4 line, unless PopART is named; PopART read in graphcore/popart):

* option setters and their argument checks, frozen options: python/options.py;
* optimizer constructors, constant attributes in `setOptimizer`, "Only IPU optimizer states can be
  loaded onto the IPU.": python/optim.py, python/_poplar_executor.py;
* the batch dimension, "Model has not been compiled or has been destroyed.", attach/detach errors,
  wrapping a model twice: python/_poplar_executor.py, python/__init__.py; accumulation in inference:
  python/__init__.py (`inferenceModel`), python/_poplar_executor.py;
* `BeginBlock` on a module twice, `recomputationCheckpoint` of non-tensors: python/ops.py;
* the pipeline rule (`gradientAccumulation` in training, `deviceIterations` in inference, against
  the stages of a `PipelinedExecution`): popart_compiler/source/CompilerImpl.cpp (`numPipelineStages`)
  and popart_compiler/source/Compiler.cpp;
* `EveryN`: PopART willow/include/popart/dataflow.hpp (every N-th global batch, all its accumulation
  steps) and willow/src/dataflow.cpp (`isValidAnchorReturnPeriod`);
* automatic loss scaling: PopART willow/src/transforms/automaticlossscaling.cpp,
  willow/src/popx/op/lossscaleupdatex.cpp, willow/include/popart/sessionoptions.hpp.

It is as strict as poptorch where a permissive stand-in would let a test pass that an IPU fails; in
particular (each rule names the poptorch source it follows, read at c2a8b177; the ids in brackets
are the commits the search index lists for those paths, see docs/execution.md):

* the executable is traced with the modules' `training` flags as they are at compile (trainingModel
  and inferenceModel wrap a shallow copy of the model and never call `.train()`);
* training differentiates only loss nodes: `identity_loss` and the torch loss functions poptorch
  lowers to one; a loss used by a later loss is folded into it, and exactly one independent loss
  must remain ("Couldn't find a loss in graph!", "Multiple independent losses found in graph");
* attached executables hold IPUs from one pool per process (`_IPU_POOL`, 64 by default or
  ``IPUFLOW_STAND_IN_IPUS``; tests lower it, 0 is a host without IPUs): compiling or attaching
  without enough free IPUs fails with poptorch's "Failed to acquire N IPU(s)"; an executable compiled
  for an offline target (`useOfflineIpuTarget`, python/options.py: ConnectionType.Never) acquires none,
  and running it fails as poptorch's `PoplarExecutor.__call__` asserts;
* `setOptimizer` refuses a parameter group without a mandatory attribute, and a new optimizer
  object without state of its own takes over the moments held on the device;
* the device draws its random numbers (dropout masks) from a generator of its own, seeded at compile
  by `randomSeed` (at random without it) and untouched by the host's `torch.manual_seed`; it is read
  and written through `PoplarExecutor.rng_state` once compiled (python/_poplar_executor.py
  `rng_state`, which poptorch reads back on detach and writes again on attach).
"""

from __future__ import annotations

import copy
import enum
import gc
import hashlib
import inspect
import logging
import os
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from tests.execution.poptorch_api import OPTIMIZER_GROUP_ATTRIBUTES

__version__ = "3.4.0+ipuflow-stand-in"

logger = logging.getLogger("poptorch")
NO_EXECUTABLE_ERR = "Model has not been compiled or has been destroyed."


class OutputMode(enum.IntEnum):
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


class ReductionType(enum.IntEnum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class AutoStage(enum.IntEnum):
    SameAsIpu = 0
    AutoIncrement = 1


class DataLoaderMode(enum.IntEnum):
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class PipelinedExecution:
    def __init__(self, *args: Any) -> None:
        for arg in args:
            if not isinstance(arg, (AutoStage, str, list, tuple)):
                raise AssertionError(f"PipelinedExecution takes an AutoStage or stages / block ids, got {arg!r}")
        self.stages = args


class ShardedExecution(PipelinedExecution):
    pass


class TensorLocationSettings:
    def __init__(self) -> None:
        self.on_chip: Optional[bool] = None
        self.replicated_tensor_sharding: Optional[bool] = None

    def useOnChipStorage(self, use: bool = True) -> "TensorLocationSettings":
        assert use is None or isinstance(use, bool)
        self.on_chip = use
        return self

    def useReplicatedTensorSharding(self, use: bool = True) -> "TensorLocationSettings":
        assert isinstance(use, bool)
        self.replicated_tensor_sharding = use
        return self


class _Recorder:
    """Records setter calls on the owning Options; every setter raises once the options are frozen."""

    def __init__(self, owner: "Options", prefix: str) -> None:
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_prefix", prefix)

    def _record(self, name: str, *args: Any) -> None:
        if self._owner._frozen:
            raise AttributeError(f"Can't modify frozen Options: {self._prefix}{name} was called after the options were used.")
        self._owner.calls.append((self._prefix + name, args))


class _TrainingOptions(_Recorder):
    def __init__(self, owner: "Options") -> None:
        super().__init__(owner, "Training.")
        object.__setattr__(self, "gradient_accumulation", 1)
        object.__setattr__(self, "reduction_type", ReductionType.Mean)
        object.__setattr__(self, "auto_loss_scaling", False)

    def gradientAccumulation(self, gradient_accumulation: int) -> "_TrainingOptions":
        self._record("gradientAccumulation", gradient_accumulation)
        object.__setattr__(self, "gradient_accumulation", gradient_accumulation)
        return self

    def accumulationAndReplicationReductionType(self, reduction_type: ReductionType) -> "_TrainingOptions":
        self._record("accumulationAndReplicationReductionType", reduction_type)
        if not isinstance(reduction_type, ReductionType) or reduction_type == ReductionType.NoReduction:
            raise ValueError("accumulationAndReplicationReductionType must be set to poptorch.ReductionType.Mean or poptorch.ReductionType.Sum")
        object.__setattr__(self, "reduction_type", reduction_type)
        return self

    def setAutomaticLossScaling(self, enabled: bool) -> "_TrainingOptions":
        self._record("setAutomaticLossScaling", enabled)
        object.__setattr__(self, "auto_loss_scaling", enabled)
        return self


class _PrecisionOptions(_Recorder):
    def __init__(self, owner: "Options") -> None:
        super().__init__(owner, "Precision.")

    def setPartialsType(self, dtype: torch.dtype) -> "_PrecisionOptions":
        self._record("setPartialsType", dtype)
        if dtype not in (torch.float, torch.float32, torch.half, torch.float16):
            raise ValueError("parameter to setPartialsType should be either torch.float or torch.half")
        return self

    def enableStochasticRounding(self, enabled: bool) -> "_PrecisionOptions":
        self._record("enableStochasticRounding", enabled)
        return self


class _TensorLocationOptions(_Recorder):
    def __init__(self, owner: "Options") -> None:
        super().__init__(owner, "TensorLocations.")

    def setOptimizerLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":
        self._record("setOptimizerLocation", location)
        assert isinstance(location, TensorLocationSettings)
        return self


class Options:
    """poptorch.Options: setters record themselves and raise after the options are used."""

    def __init__(self) -> None:
        self._frozen = False
        self.calls: List[Tuple[str, tuple]] = []
        self.device_iterations = 1
        self.replication_factor = 1
        self.output_mode = OutputMode.Default
        self.output_return_period = 1
        self.random_seed: Optional[int] = None
        self.offline_ipu_version: Optional[int] = None  # set by useOfflineIpuTarget: compile only, no IPU attached
        self._training = _TrainingOptions(self)
        self._precision = _PrecisionOptions(self)
        self._tensor_locations = _TensorLocationOptions(self)

    @property
    def Training(self) -> _TrainingOptions:
        return self._training

    @property
    def Precision(self) -> _PrecisionOptions:
        return self._precision

    @property
    def TensorLocations(self) -> _TensorLocationOptions:
        return self._tensor_locations

    def _record(self, name: str, *args: Any) -> None:
        if self._frozen:
            raise AttributeError(f"Can't modify frozen Options: {name} was called after the options were used.")
        self.calls.append((name, args))

    def called(self, name: str) -> List[tuple]:
        """The arguments of every call to setter `name` (a test helper, not poptorch's)."""
        return [args for call, args in self.calls if call == name]

    def deviceIterations(self, device_iterations: int) -> "Options":
        self._record("deviceIterations", device_iterations)
        self.device_iterations = device_iterations
        return self

    def replicationFactor(self, replication_factor: int) -> "Options":
        self._record("replicationFactor", replication_factor)
        self.replication_factor = replication_factor
        return self

    def outputMode(self, output_mode: OutputMode, output_return_period: Optional[int] = None) -> "Options":
        self._record("outputMode", output_mode, output_return_period)
        assert isinstance(output_mode, OutputMode)
        if output_mode == OutputMode.EveryN:
            assert output_return_period and output_return_period > 0, "EveryN anchor must have output_return_period set to valid positive integer"
        self.output_mode = output_mode
        self.output_return_period = output_return_period or 1
        return self

    def randomSeed(self, random_seed: int) -> "Options":
        self._record("randomSeed", random_seed)
        assert isinstance(random_seed, int)
        torch.manual_seed(random_seed)
        self.random_seed = random_seed
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus: bool = True) -> "Options":
        self._record("autoRoundNumIPUs", auto_round_num_ipus)
        return self

    def enableExecutableCaching(self, path: str) -> "Options":
        self._record("enableExecutableCaching", path)
        return self

    def setAvailableMemoryProportion(self, available_memory_proportion: Dict[str, float]) -> "Options":
        self._record("setAvailableMemoryProportion", available_memory_proportion)
        for key in available_memory_proportion:
            assert key.startswith("IPU"), f"Available memory proportions are expected to be in a dictionary of {{\"IPU0\": 0.5}}. Invalid key: {key}"
        return self

    def setExecutionStrategy(self, strategy: PipelinedExecution) -> "Options":
        self._record("setExecutionStrategy", strategy)
        assert isinstance(strategy, PipelinedExecution)
        return self

    def useOfflineIpuTarget(self, ipu_version: int = 2) -> "Options":
        # python/options.py: connectionType(Never) and the IPU version compiled for; the executable can
        # be compiled (and cached) without any IPU, never run.
        self._record("useOfflineIpuTarget", ipu_version)
        self.offline_ipu_version = ipu_version
        return self

    def defaultOutputMode(self) -> bool:
        return self.output_mode == OutputMode.Default

    def clone(self) -> "Options":
        cloned = copy.deepcopy(self)
        return cloned

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Options":
        cloned = Options()
        cloned.calls = list(self.calls)
        for key in ("device_iterations", "replication_factor", "output_mode", "output_return_period", "random_seed",
                    "offline_ipu_version"):
            setattr(cloned, key, getattr(self, key))
        for key in ("gradient_accumulation", "reduction_type", "auto_loss_scaling"):
            object.__setattr__(cloned.Training, key, getattr(self.Training, key))
        return cloned


# -- ops ----------------------------------------------------------------------------------------


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        loss = x.sum()
    elif reduction == "mean":
        loss = x.mean()
    elif reduction == "none":
        loss = x.clone()
    else:
        raise ValueError(f"identity_loss: unknown reduction {reduction!r}")
    if _LossGraph.recording:
        _LossGraph.recording[-1].add_loss(loss, x)
    return loss


class _Trace:
    """What the compile trace saw: blocks entered (in order) and tensors checkpointed. poptorch traces
    the model when it compiles; the stand-in runs one micro-batch through a copy to see the same."""

    def __init__(self) -> None:
        self.placements: List[Tuple[Optional[str], Optional[int]]] = []
        self.recomputation_checkpoints = 0


_TRACE: Optional[_Trace] = None
"""The compile trace in progress (None outside compile: blocks and checkpoints are no-ops on the CPU)."""

_BLOCK_HOOKS: "weakref.WeakKeyDictionary[torch.nn.Module, Any]" = weakref.WeakKeyDictionary()


def recomputationCheckpoint(*tensors: Any) -> Any:
    # poptorch python/ops.py (c2a8b177): tensors, or one tuple/list of tensors (returned as the same
    # type); anything else is refused.
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return type(tensors[0])(recomputationCheckpoint(*tensors[0]))
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            raise ValueError("All inputs must be tensors")
    if _TRACE is not None:
        _TRACE.recomputation_checkpoints += len(tensors)
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def set_available_memory(tensor: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    return tensor


def _enter_block(module: torch.nn.Module, inputs: Any) -> None:
    if _TRACE is not None and hasattr(module, "poptorch_block"):
        _TRACE.placements.append(module.poptorch_block)


def BeginBlock(layer_to_call: torch.nn.Module, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> torch.nn.Module:
    # poptorch python/ops.py (c2a8b177): a forward pre-hook that starts the block when the module runs.
    if not isinstance(layer_to_call, torch.nn.Module):
        raise RuntimeError("module is not an instance of torch.nn.Module or function.")
    if hasattr(layer_to_call, "poptorch_block"):
        raise RuntimeError("module has already been assigned to a block.")
    layer_to_call.poptorch_block = (user_id, ipu_id)  # type: ignore[attr-defined]
    _BLOCK_HOOKS[layer_to_call] = layer_to_call.register_forward_pre_hook(_enter_block)
    return layer_to_call


def removeBlocks(module: torch.nn.Module) -> None:
    for submodule in module.modules():
        if hasattr(submodule, "poptorch_block"):
            del submodule.poptorch_block
        hook = _BLOCK_HOOKS.pop(submodule, None)
        if hook is not None:
            hook.remove()


class Block:
    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        self.user_id, self.ipu_id = user_id, ipu_id

    def __enter__(self) -> "Block":
        if _TRACE is not None:
            _TRACE.placements.append((self.user_id, self.ipu_id))
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


# -- optimizers -----------------------------------------------------------------------------------
# Signatures as in poptorch's python/optim.py (poptorch_api.py records them): every argument but
# `params` defaults to None; arguments given explicitly are "variable" (setOptimizer may change
# them), the others "constant". `state_dict()` of a wrapped optimizer reads the device state back
# in poptorch's own format ({"ipu_state", "ipu_param"} plus torch's groups); `load_state_dict`
# accepts only that format.

_FP_TYPES = (torch.float16, torch.float32)


class _VariableAttributes:
    def __init__(self, variable_attributes: List[str], allowed_attributes: List[str]) -> None:
        self._variable, self._allowed = list(variable_attributes), list(allowed_attributes)

    def isConstant(self, attr: str) -> bool:
        return attr not in self._variable


class _PoptorchOptimizer:
    """poptorch.optim.Optimizer: the IPU state dict and its dirty flags."""

    def _init_poptorch(self, explicit: Dict[str, Any], globals_: Dict[str, Any]) -> None:
        self._state_dict: Dict[str, Any] = {"ipu_state": None, "ipu_param": None}
        self.ipu_state_is_dirty = False
        self.host_state_is_dirty = False
        for key, value in globals_.items():
            setattr(self, key, value)
        for key in ("accum_type", "velocity_accum_type", "first_order_momentum_accum_type", "second_order_momentum_accum_type"):
            if key in globals_:
                assert globals_[key] in _FP_TYPES, "Accumulation types must be either torch.float32 or torch.float16"
        self.variable_attrs = _VariableAttributes([key for key, value in explicit.items() if value is not None],
                                                  list(self.defaults) + ["loss_scaling"])

    def state_dict(self) -> Dict[str, Any]:
        # poptorch's setOptimizer replaces this method on the wrapped optimizer with a read of the IPU
        # state; the stand-in keeps the method and looks the reader up instead (same behaviour).
        reader = self.__dict__.get("_read_from_device")
        return reader() if reader is not None else self.get_state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        torch.optim.Optimizer.load_state_dict(self, {"state": {}, "param_groups": state["param_groups"]})
        self.set_state_dict(state)

    def get_state_dict(self) -> Dict[str, Any]:
        return {**self._state_dict, **torch.optim.Optimizer.state_dict(self)}

    def set_state_dict(self, state: Dict[str, Any]) -> None:
        if not state:
            raise RuntimeError("Cannot load optimizer state dictionary because it is empty.")
        if not ("ipu_state" in state and "ipu_param" in state):
            raise RuntimeError("Only IPU optimizer states can be loaded onto the IPU.")
        self._state_dict = state
        self.ipu_state_is_dirty = True
        self.host_state_is_dirty = False

    def has_state(self) -> bool:
        return self._state_dict.get("ipu_state") is not None and self._state_dict.get("ipu_param") is not None


def _given(arguments: Dict[str, Any], names: Tuple[str, ...]) -> Dict[str, Any]:
    return {name: arguments[name] for name in names if arguments[name] is not None}


def _lamb_step(self: Any) -> None:
    """The LAMB update of poptorch's reference `LAMB.step` (the device runs its own kernels)."""
    with torch.no_grad():
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                state = self.state[parameter]
                if not state:
                    state["step"] = torch.zeros(())
                    state["exp_avg"] = torch.zeros_like(parameter)
                    state["exp_avg_sq"] = torch.zeros_like(parameter)
                state["step"] += 1
                state["exp_avg"].mul_(beta1).add_(parameter.grad, alpha=1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(parameter.grad, parameter.grad, value=1 - beta2)
                first, second = state["exp_avg"], state["exp_avg_sq"]
                if self.bias_correction:  # type: ignore[attr-defined]
                    first = first / (1 - beta1 ** state["step"])
                    second = second / (1 - beta2 ** state["step"])
                update = first / (second.sqrt() + group["eps"]) + group["weight_decay"] * parameter
                weight_norm = parameter.norm().clamp(max=group["max_weight_norm"])
                update_norm = update.norm()
                trust = torch.where((weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, torch.ones(()))
                parameter.sub_(group["lr"] * trust * update)


class optim:  # noqa: N801 (a namespace standing in for the poptorch.optim module)
    """poptorch.optim: torch's maths plus poptorch's global attributes and IPU state format."""

    Optimizer = _PoptorchOptimizer
    VariableAttributes = _VariableAttributes

    class SGD(_PoptorchOptimizer, torch.optim.SGD):
        def __init__(self, params: Any, lr: float, momentum: Optional[float] = None, dampening: Optional[float] = None,
                     weight_decay: Optional[float] = None, nesterov: Optional[bool] = None, maximize: Optional[bool] = None,
                     foreach: Optional[bool] = None, differentiable: Optional[bool] = None, loss_scaling: Optional[float] = None,
                     velocity_scaling: Optional[float] = None, use_combined_accum: Optional[bool] = None,
                     accum_type: Optional[torch.dtype] = None, velocity_accum_type: Optional[torch.dtype] = None,
                     max_grad_norm: Optional[float] = None) -> None:
            arguments = dict(locals())
            torch.optim.SGD.__init__(self, params, lr=lr, **_given(arguments, ("momentum", "dampening", "weight_decay", "nesterov")))
            self._init_poptorch(_given(arguments, ("lr", "momentum", "dampening", "weight_decay", "nesterov", "loss_scaling")), {
                "loss_scaling": 1.0 if loss_scaling is None else loss_scaling,
                "use_combined_accum": bool(use_combined_accum),
                "accum_type": accum_type or torch.float32, "velocity_accum_type": velocity_accum_type or torch.float32,
                "max_grad_norm": float("inf") if max_grad_norm is None else max_grad_norm})

    class Adam(_PoptorchOptimizer, torch.optim.Adam):
        def __init__(self, params: Any, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                     eps: Optional[float] = None, weight_decay: Optional[float] = None, amsgrad: Optional[bool] = None,
                     foreach: Optional[bool] = None, maximize: Optional[bool] = None, capturable: Optional[bool] = None,
                     differentiable: Optional[bool] = None, fused: Optional[bool] = None, loss_scaling: Optional[float] = None,
                     accum_type: Optional[torch.dtype] = None, first_order_momentum_accum_type: Optional[torch.dtype] = None,
                     second_order_momentum_accum_type: Optional[torch.dtype] = None, max_grad_norm: Optional[float] = None) -> None:
            arguments = dict(locals())
            if amsgrad:
                raise ValueError("poptorch.optim.Adam: AMSGrad is currently not supported")
            torch.optim.Adam.__init__(self, params, **_given(arguments, ("lr", "betas", "eps", "weight_decay")))
            self._init_poptorch(_given(arguments, ("lr", "betas", "eps", "weight_decay", "amsgrad", "loss_scaling")), {
                "loss_scaling": 1.0 if loss_scaling is None else loss_scaling,
                "accum_type": accum_type or torch.float32,
                "first_order_momentum_accum_type": first_order_momentum_accum_type or torch.float32,
                "second_order_momentum_accum_type": second_order_momentum_accum_type or torch.float32,
                "max_grad_norm": float("inf") if max_grad_norm is None else max_grad_norm})

    class AdamW(_PoptorchOptimizer, torch.optim.AdamW):
        def __init__(self, params: Any, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                     eps: Optional[float] = None, weight_decay: Optional[float] = None, amsgrad: Optional[bool] = None,
                     maximize: Optional[bool] = None, foreach: Optional[bool] = None, capturable: Optional[bool] = None,
                     differentiable: Optional[bool] = None, fused: Optional[bool] = None, loss_scaling: Optional[float] = None,
                     bias_correction: Optional[bool] = None, accum_type: Optional[torch.dtype] = None,
                     first_order_momentum_accum_type: Optional[torch.dtype] = None,
                     second_order_momentum_accum_type: Optional[torch.dtype] = None, max_grad_norm: Optional[float] = None) -> None:
            arguments = dict(locals())
            if amsgrad:
                raise ValueError("poptorch.optim.AdamW: AMSGrad is currently not supported")
            if bias_correction is False:
                raise NotImplementedError("the stand-in implements AdamW with bias correction only")
            torch.optim.AdamW.__init__(self, params, **_given(arguments, ("lr", "betas", "eps", "weight_decay")))
            self._init_poptorch(_given(arguments, ("lr", "betas", "eps", "weight_decay", "amsgrad", "loss_scaling")), {
                "loss_scaling": 1.0 if loss_scaling is None else loss_scaling, "bias_correction": True,
                "accum_type": accum_type or torch.float32,
                "first_order_momentum_accum_type": first_order_momentum_accum_type or torch.float32,
                "second_order_momentum_accum_type": second_order_momentum_accum_type or torch.float32,
                "max_grad_norm": float("inf") if max_grad_norm is None else max_grad_norm})

    class RMSprop(_PoptorchOptimizer, torch.optim.RMSprop):
        def __init__(self, params: Any, lr: Optional[float] = None, alpha: Optional[float] = None, eps: Optional[float] = None,
                     weight_decay: Optional[float] = None, momentum: Optional[float] = None, centered: Optional[bool] = None,
                     foreach: Optional[bool] = None, maximize: Optional[bool] = None, differentiable: Optional[bool] = None,
                     loss_scaling: Optional[float] = None, accum_type: Optional[torch.dtype] = None,
                     first_order_momentum_accum_type: Optional[torch.dtype] = None,
                     second_order_momentum_accum_type: Optional[torch.dtype] = None, use_tf_variant: Optional[bool] = None) -> None:
            arguments = dict(locals())
            if use_tf_variant:
                raise NotImplementedError("the stand-in implements torch's RMSprop only")
            torch.optim.RMSprop.__init__(self, params, **_given(arguments, ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")))
            self._init_poptorch(_given(arguments, ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "loss_scaling")), {
                "loss_scaling": 1.0 if loss_scaling is None else loss_scaling, "use_tf_variant": False,
                "accum_type": accum_type or torch.float32,
                "first_order_momentum_accum_type": first_order_momentum_accum_type or torch.float32,
                "second_order_momentum_accum_type": second_order_momentum_accum_type or torch.float32})

    class LAMB(_PoptorchOptimizer, torch.optim.Optimizer):
        def __init__(self, params: Any, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                     eps: Optional[float] = None, weight_decay: Optional[float] = None, bias_correction: Optional[bool] = None,
                     loss_scaling: Optional[float] = None, max_weight_norm: Optional[float] = None,
                     accum_type: Optional[torch.dtype] = None, first_order_momentum_accum_type: Optional[torch.dtype] = None,
                     second_order_momentum_accum_type: Optional[torch.dtype] = None) -> None:
            arguments = dict(locals())
            defaults = dict(lr=1e-3 if lr is None else lr, betas=(0.9, 0.999) if betas is None else betas,
                            eps=1e-8 if eps is None else eps, weight_decay=1e-2 if weight_decay is None else weight_decay,
                            max_weight_norm=65500.0 if max_weight_norm is None else max_weight_norm)  # fp16 max
            torch.optim.Optimizer.__init__(self, params, defaults)
            self._init_poptorch(_given(arguments, ("lr", "betas", "eps", "weight_decay", "max_weight_norm", "loss_scaling")), {
                "loss_scaling": 1.0 if loss_scaling is None else loss_scaling,
                "bias_correction": True if bias_correction is None else bias_correction,
                "max_weight_norm": defaults["max_weight_norm"],
                "accum_type": accum_type or torch.float32,
                "first_order_momentum_accum_type": first_order_momentum_accum_type or torch.float32,
                "second_order_momentum_accum_type": second_order_momentum_accum_type or torch.float32})

        def step(self, closure: Optional[Any] = None) -> Optional[float]:
            loss = closure() if closure is not None else None
            _lamb_step(self)
            return loss


def _group_vars(optimizer: torch.optim.Optimizer) -> Tuple[str, ...]:
    for kind, name in ((optim.LAMB, "LAMB"), (torch.optim.AdamW, "AdamW"), (torch.optim.Adam, "Adam"),
                       (torch.optim.RMSprop, "RMSprop"), (torch.optim.SGD, "SGD")):
        if isinstance(optimizer, kind):
            return OPTIMIZER_GROUP_ATTRIBUTES[name]  # each poptorch optimizer's `_group_vars`
    raise AssertionError(f"Unsupported optimizer type. Types supported {sorted(OPTIMIZER_GROUP_ATTRIBUTES)}")


def _check_mandatory_group_attributes(optimizer: torch.optim.Optimizer) -> None:
    """poptorch's convertOptimizerToDict reads every group variable from the defaults and from each
    parameter group through _GroupGetter, which asserts the value is not None (velocity_scaling
    defaults to 1.0; nesterov, amsgrad and centered have readers of their own), python/_optimizer_attributes.py
    [f8bba893]."""
    names = [name for name in _group_vars(optimizer) if name not in ("nesterov", "amsgrad", "centered")]
    for group in (optimizer.defaults, *optimizer.param_groups):
        for name in names:
            if group.get(name, 1.0 if name == "velocity_scaling" else None) is None:
                raise AssertionError(f"Mandatory attribute {name} not found in optimizer group")


_GLOBAL_ATTRIBUTES = ("loss_scaling", "max_grad_norm", "bias_correction", "use_combined_accum", "use_tf_variant",
                      "accum_type", "velocity_accum_type", "first_order_momentum_accum_type", "second_order_momentum_accum_type")


# -- the executor -----------------------------------------------------------------------------------


_ALS_BIN_EDGE_LOCATION = 0.0625
_ALS_THRESHOLD_UPPER_COUNT_PROPORTION = 1e-7
_ALS_MAX_HALF_SCALE = 2.0**15


def _automatic_loss_scale(scale: float, gradients: List[Tuple[torch.dtype, torch.Tensor]]) -> float:
    """PopART's automatic loss scaling update, run after every weight update (updatePeriod 1), which is
    never skipped: a histogram of the loss-scaled gradients' magnitudes with one bin edge at
    binEdgeLocation (1/16) of their dtype's maximum (PopART takes 65535 for fp16: getLevels in
    popart willow/src/transforms/automaticlossscaling.cpp); the scale halves when the upper bin holds
    more than thresholdUpperCountProportion (1e-7) of the elements, doubles otherwise, and is clipped at
    2^15 when the weights are fp16 (willow/src/popx/op/lossscaleupdatex.cpp; defaults from
    willow/include/popart/sessionoptions.hpp). PopART tracks the gradients of matmul and convolution
    outputs; the stand-in tracks the weight gradients, so its scale may turn at other steps than an
    IPU's. A non-finite element counts in the upper bin."""
    upper = total = 0
    half = False
    for dtype, gradient in gradients:
        half = half or dtype == torch.float16
        limit = 65535.0 if dtype == torch.float16 else torch.finfo(torch.float32).max
        upper += int((~(gradient.detach().float().abs() <= limit * _ALS_BIN_EDGE_LOCATION)).sum())
        total += gradient.numel()
    threshold = _ALS_THRESHOLD_UPPER_COUNT_PROPORTION
    factor = 0.5 if upper > threshold / (1 - threshold) * (total - upper) else 2.0
    new = scale * factor
    return min(new, _ALS_MAX_HALF_SCALE) if half else new


_LOSS_OPS = (
    # poptorch scripts/PopAtenHandlers.py (generating popart_canonicalization/AtenHandlers.gen.cpp [0d273e38]):
    # the handlers that end in op.identityloss.
    "hinge_embedding_loss", "l1_loss", "margin_ranking_loss", "mse_loss", "smooth_l1_loss", "soft_margin_loss",
    # poptorch/source/popart_canonicalization/LossOps.cpp [096da7a6] `registration()`: cross_entropy_loss
    # (log_softmax then nll_loss), nll_loss_nd, binary_cross_entropy, kl_div, poisson_nll_loss,
    # binary_cross_entropy_with_logits, cosine_embedding_loss, triplet_margin_loss, ctc_loss. Its
    # multilabel_soft_margin_loss handler is left out: torch's function never calls that aten op
    # (LossOps.cpp says so, T30688), so the ops it decomposes into are no loss node.
    "cross_entropy", "nll_loss", "binary_cross_entropy", "kl_div", "poisson_nll_loss",
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "triplet_margin_loss", "ctc_loss",
)
"""The aten ops poptorch lowers to an identity loss with their reduction (anything else, huber_loss
and gaussian_nll_loss included, is plain arithmetic to it)."""

_LOWERED_LOSSES = frozenset(
    function for name in _LOSS_OPS for function in (getattr(torch.nn.functional, name, None), getattr(torch, name, None))
    if function is not None
)
"""The Python functions that reach those ops: `torch.nn.functional`'s and torch's own (a loss module
calls the former)."""


def _tensors(value: Any) -> List[torch.Tensor]:
    """The tensors in `value`, nested in tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in _tensors(item)]
    if isinstance(value, dict):
        return [tensor for item in value.values() for tensor in _tensors(item)]
    return []


class _LossGraph(TorchFunctionMode):
    """The loss nodes of one traced forward (`identity_loss` results and the results of the torch loss
    functions poptorch lowers to one) and, for every tensor the forward computes, the loss nodes it
    was computed from: the use-def chains RemoveSurplusIdentityLosses.cpp follows, through every op
    (detach and integer ops included, which autograd does not see)."""

    recording: List["_LossGraph"] = []

    def __init__(self) -> None:
        super().__init__()
        self.losses: List[torch.Tensor] = []
        self._used: set = set()  # indices of loss nodes a later loss node uses
        self._sources: Dict[int, frozenset] = {}  # id(tensor) -> indices of the loss nodes it comes from
        self._alive: List[torch.Tensor] = []  # keeps the ids in _sources from being reused while recording

    def __enter__(self) -> "_LossGraph":
        _LossGraph.recording.append(self)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        _LossGraph.recording.pop()
        super().__exit__(*exc)

    def _sources_of(self, value: Any) -> frozenset:
        return frozenset().union(*(self._sources.get(id(tensor), frozenset()) for tensor in _tensors(value)))

    def _tag(self, value: Any, sources: frozenset) -> None:
        for tensor in _tensors(value):
            self._sources[id(tensor)] = self._sources.get(id(tensor), frozenset()) | sources
            self._alive.append(tensor)

    def add_loss(self, loss: torch.Tensor, inputs: Any) -> None:
        """Record `loss` as a loss node computed from `inputs` (whose loss nodes it uses)."""
        self._used |= self._sources_of(inputs)
        self._tag(loss, frozenset({len(self.losses)}))
        self.losses.append(loss)

    def __torch_function__(self, func: Callable, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in _LOWERED_LOSSES:
            self.add_loss(result, (args, kwargs))
        else:
            sources = self._sources_of((args, kwargs))
            if sources:
                self._tag(result, sources)
        return result

    def final_loss(self) -> torch.Tensor:
        """The loss the device differentiates, as poptorch/source/RemoveSurplusIdentityLosses.cpp
        [12ca07cb] picks it: a loss node used by a later loss node is folded into it
        (`traverseUseDef`); exactly one independent loss must remain, with that file's messages. An
        unreduced ("none") loss is differentiated with a gradient of one for every element: as the
        sum of its elements."""
        if not self.losses:
            raise RuntimeError("Couldn't find a loss in graph!")
        independent = [loss for index, loss in enumerate(self.losses) if index not in self._used]
        if len(independent) != 1:
            raise RuntimeError("Multiple independent losses found in graph. Graph must have one final loss. "
                               "Wrap final graph loss in poptorch.identityLoss.")
        loss = independent[0]
        return loss if loss.dim() == 0 else loss.sum()


class _IpuPool:
    """The IPUs of this process's machine, shared by every attached executable (a test sets `total`)."""

    def __init__(self) -> None:
        self.total = int(os.environ.get("IPUFLOW_STAND_IN_IPUS", "64"))
        self._held: "weakref.WeakKeyDictionary[PoplarExecutor, int]" = weakref.WeakKeyDictionary()

    def acquire(self, holder: "PoplarExecutor", count: int) -> None:
        """Hold `count` IPUs for `holder`, or fail as poptorch's CompilerImpl::createDevice does
        (popart_compiler/source/CompilerImpl.cpp [1d26cbd1]: "Failed to acquire N IPU(s)")."""
        if self._free() < count:
            gc.collect()  # an executable freed by the garbage collector released its IPUs (~CompilerImpl detaches)
        if self._free() < count:
            raise RuntimeError(f"Failed to acquire {count} IPU(s)")
        self._held[holder] = count

    def release(self, holder: "PoplarExecutor") -> None:
        self._held.pop(holder, None)

    def _free(self) -> int:
        return self.total - sum(self._held.values())


_IPU_POOL = _IpuPool()


def _ipus_needed(model: torch.nn.Module, options: "Options") -> int:
    """IPUs an executable acquires: (highest block IPU + 1) x replicas, rounded up to a power of two
    as autoRoundNumIPUs(True) asks (CompilerImpl::createDevice)."""
    ipus = 1 + max((block[1] or 0 for block in (getattr(module, "poptorch_block", None) for module in model.modules())
                    if block is not None), default=0)
    needed = ipus * options.replication_factor
    return 1 << (needed - 1).bit_length()


def _seeded_device_rng(seed: Optional[int]) -> List[int]:
    """The device's seed and generator state after compile: `randomSeed`'s seed, which poptorch sends
    to the device only when it was set (popart_compiler/source/Compiler.cpp [c2a8b177]
    compileAndPrepareDevice: "Set the random seed (if one was provided)"). What an unseeded device
    starts from is not poptorch's to say, so the stand-in draws a seed at random: a test that needs
    repeatable masks must seed the device."""
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little")
    generator = torch.Generator()
    generator.manual_seed(seed)
    return [seed] + generator.get_state().tolist()


class PoplarExecutor:
    """A CPU emulation of poptorch's PoplarExecutor with separate "device" weights and optimizer state."""

    def __init__(self, model: torch.nn.Module, options: Options, training: bool, optimizer: Optional[torch.optim.Optimizer]) -> None:
        options._frozen = True  # poptorch freezes the user's options and keeps an unfrozen clone
        options = options.clone()
        self._user_model = model
        # trainingModel/inferenceModel wrap a shallow copy (python/__init__.py [0044b21a]): the
        # submodules are shared, the top module's own attributes (its `training` flag) are copied.
        self._model = copy.copy(model)
        self._options = options
        self._training = training
        if options.defaultOutputMode():
            options.outputMode(OutputMode.Final if training else OutputMode.All)
        self._optimizer: Optional[torch.optim.Optimizer] = None
        self._sent_hyperparameters: List[Dict[str, Any]] = []
        self._device_model: Optional[torch.nn.Module] = None
        self._device_optimizer: Optional[torch.optim.Optimizer] = None
        self._updated: Dict[str, torch.Tensor] = {}
        self._input_spec: Optional[Dict[str, Tuple[torch.Size, torch.dtype]]] = None
        self._attached = False
        self._ipus = 0  # IPUs the compiled executable acquires
        self._rng: Optional[List[int]] = None  # the device's random seed and generator state, from compile
        self._host_weights_version = -1
        self.set_optimizer_calls = 0
        # What the compile trace saw (test helpers, not poptorch's): blocks in the order entered,
        # tensors checkpointed for recomputation, and the pipeline stages they make.
        self.placements: List[Tuple[Optional[str], Optional[int]]] = []
        self.recomputation_checkpoints = 0
        self.pipeline_stages = 1
        if optimizer is not None:
            self.setOptimizer(optimizer)
        options._frozen = True

    @property
    def options(self) -> Options:
        return self._options

    @property
    def model(self) -> torch.nn.Module:
        return self._user_model

    def _factor(self) -> int:
        return self._options.device_iterations * self._options.replication_factor * self._options.Training.gradient_accumulation

    def _narrow(self, key: str, tensor: torch.Tensor) -> Tuple[torch.Size, torch.dtype]:
        factor = self._factor()
        size = tensor.shape[0]
        if size % factor != 0:
            raise ValueError(
                f"Invalid batch dimension: In the input {tuple(tensor.shape)}, the batch dimension ({size}) must be a "
                f"multiple of Options.deviceIterations({self._options.device_iterations}) * "
                f"Options.replicationFactor({self._options.replication_factor}) * "
                f"Options.Training.gradientAccumulation({self._options.Training.gradient_accumulation}) = {factor}"
            )
        return tensor.shape, tensor.dtype

    def compile(self, *args: Any, **kwargs: torch.Tensor) -> None:
        if args:
            raise NotImplementedError("the stand-in takes keyword inputs only")
        inputs = kwargs
        if self.isCompiled():
            logger.warning("Call to compile() ignored: the executable is already compiled")
            return
        self._input_spec = {key: self._narrow(key, value) for key, value in inputs.items()}
        self._check_return_period()
        self._trace(inputs)
        self._ipus = _ipus_needed(self._model, self._options)
        offline = self._options.offline_ipu_version is not None
        if not offline:
            # Compiling acquires the IPUs (connection type Always) before the engine loads; an offline
            # target (ConnectionType.Never) loads no engine (python/_poplar_executor.py _compile).
            _IPU_POOL.acquire(self, self._ipus)
        # The trace is the modules as they are now, modes included: poptorch never calls .train()
        # (PoplarExecutor._compileWithDispatch calls the wrapped model as it is, python/_poplar_executor.py
        # [1ec449d6]); the "device" keeps that trace until it is destroyed.
        self._device_model = copy.deepcopy(self._model)
        self._rng = _seeded_device_rng(self._options.random_seed)
        if self._training:
            self._build_device_optimizer()
        if not offline:
            self._attached = True
            self._on_device_attach()
        self._save_to_executable_cache()

    def _trace(self, inputs: Dict[str, torch.Tensor]) -> None:
        """Trace one micro-batch through a copy of the model (its mode, random numbers and buffers
        untouched), recording blocks and checkpoints, then apply poptorch's pipeline rules."""
        global _TRACE
        micro = next(iter(inputs.values())).shape[0] // self._factor()
        model = copy.deepcopy(self._model)  # the wrapped copy, in the mode it will be compiled in
        _TRACE = _Trace()
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                model(**{key: value[:micro] for key, value in inputs.items()})
            trace = _TRACE
        finally:
            _TRACE = None
        self.placements = trace.placements
        self.recomputation_checkpoints = trace.recomputation_checkpoints
        self._check_pipeline_stages()

    def _check_pipeline_stages(self) -> None:
        """popart_compiler/source/CompilerImpl.cpp numPipelineStages and Compiler.cpp (poptorch
        c2a8b177): every IPU switch starts a forward stage; training adds one backward stage per forward
        stage but the last; PipelinedExecution needs gradientAccumulation (training) or
        deviceIterations (inference) >= the stages. ShardedExecution has no such rule."""
        strategies = self._options.called("setExecutionStrategy")
        if strategies and type(strategies[-1][0]) is not PipelinedExecution:
            return
        ipus = [0] + [ipu for _, ipu in self.placements if ipu is not None]
        forward = 1 + sum(1 for previous, ipu in zip(ipus, ipus[1:]) if ipu != previous)
        stages = 2 * forward - 1 if self._training else forward
        self.pipeline_stages = stages
        if self._training and self._options.Training.gradient_accumulation < stages:
            raise RuntimeError(
                "poptorch.Options().Training.gradientAccumulation must be greater than or equal to the number of "
                f"pipeline stages ({stages}) when using poptorch.PipelinedExecution. Please note that a model with "
                f"{forward} pipeline stages in PopTorch will have an additional {forward - 1} stages when training.")
        if not self._training and self._options.device_iterations < stages:
            raise RuntimeError("poptorch.Options().deviceIterations must be greater than or equal to the number of "
                               f"pipeline stages ({stages}) when using PopTorch.PipelinedExecution.")

    def _check_return_period(self) -> None:
        """PopART's DataFlow::isValidAnchorReturnPeriod (popart willow/src/dataflow.cpp), run when the
        session is built: EveryN's N must divide the batches per step (device iterations)."""
        options = self._options
        if options.output_mode != OutputMode.EveryN:
            return
        if options.output_return_period > options.device_iterations:
            raise RuntimeError("Return period must be <= to the number of batches per step")
        if options.device_iterations % options.output_return_period:
            raise RuntimeError("Return period must be a factor of the number of batches per step")

    def _save_to_executable_cache(self) -> None:
        # poptorch (through PopART) writes the compiled executable into the cache directory as
        # <hash>.popef when enableExecutableCaching(path) was set; the stand-in writes the signature.
        for (path,) in self._options.called("enableExecutableCaching"):
            signature = repr((self._training, sorted((key, tuple(shape), str(dtype)) for key, (shape, dtype) in self._input_spec.items())))
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, hashlib.sha1(signature.encode()).hexdigest() + ".popef"), "w") as entry:
                entry.write(signature)

    def _on_device_attach(self) -> None:
        self.copyWeightsToDevice()
        optimizer = self._optimizer
        if isinstance(optimizer, _PoptorchOptimizer):
            if optimizer.has_state():
                optimizer.ipu_state_is_dirty = True
                self._write_optimizer_state_if_needed()
            else:
                optimizer.host_state_is_dirty = True
                optimizer.ipu_state_is_dirty = False

    def _build_device_optimizer(self) -> None:
        """The device's optimizer: the same class, groups and hyperparameters over the device weights.

        A half model's weights stay fp16 (IPUs keep no fp32 master copy); the stand-in computes each
        update in fp32 on a copy of the fp16 weights and keeps the optimizer state in the optimizer's
        accumulation dtypes (`_update`)."""
        assert self._optimizer is not None and self._device_model is not None
        host_names = {id(parameter): name for name, parameter in self._user_model.named_parameters()}
        device_parameters = dict(self._device_model.named_parameters())
        self._updated = {name: parameter if parameter.dtype != torch.float16 else torch.nn.Parameter(parameter.detach().float())
                         for name, parameter in device_parameters.items()}
        groups = [
            {**hyper, "params": [self._updated[host_names[id(parameter)]] for parameter in group["params"]]}
            for group, hyper in zip(self._optimizer.param_groups, self._sent_hyperparameters)
        ]
        kind = type(self._optimizer)
        accepted = inspect.signature(kind.__init__).parameters
        extras = {key: getattr(self._optimizer, key) for key in _GLOBAL_ATTRIBUTES if key in accepted and hasattr(self._optimizer, key)}
        if extras.get("max_grad_norm") == float("inf"):
            extras["max_grad_norm"] = None
        extras["lr"] = self._optimizer.defaults["lr"]
        self._device_optimizer = kind(groups, **extras)

    def _replace_device_optimizer(self) -> None:
        """A new optimizer object after compile: its hyperparameters reach the device, but the moments
        stay those in the executable's tensors. poptorch writes optimizer state only when the new
        optimizer has some of its own (setOptimizer -> _write_optim_state_dict_if_needed writes only
        when has_state(), python/_poplar_executor.py [1ec449d6]); otherwise the device state is kept.
        (Another optimizer type is another program; the stand-in starts that one's state afresh.)"""
        previous = self._device_optimizer
        kept = {name: previous.state[tensor] for name, tensor in self._updated.items()
                if previous is not None and tensor in previous.state}
        self._build_device_optimizer()
        assert self._device_optimizer is not None
        if previous is not None and type(previous) is type(self._device_optimizer):
            for name, state in kept.items():
                self._device_optimizer.state[self._updated[name]] = state

    def _device_names(self) -> Dict[int, str]:
        return {id(parameter): name for name, parameter in self._updated.items()}

    def _read_optimizer_state(self) -> Dict[str, Any]:
        """The device optimizer state in poptorch's format: named state tensors and weights."""
        assert self._device_optimizer is not None and self._device_model is not None
        names = self._device_names()
        # torch 2.0's RMSprop counts its step in a Python int, later torch in a tensor: both kept, as tensors.
        ipu_state = {f"{names[id(parameter)]}/{key}": torch.as_tensor(value).detach().clone()
                     for parameter, state in self._device_optimizer.state.items() for key, value in state.items()
                     if isinstance(value, (torch.Tensor, int, float))}
        ipu_param = {name: value.detach().clone() for name, value in self._device_model.named_parameters()}
        return {"ipu_state": ipu_state, "ipu_param": ipu_param}

    def _optimizer_state_dict(self) -> Dict[str, Any]:
        """poptorch instruments the wrapped optimizer's state_dict() with this: read the IPU state back."""
        optimizer = self._optimizer
        assert isinstance(optimizer, _PoptorchOptimizer)
        if optimizer.host_state_is_dirty:
            if not self.isCompiled():
                raise RuntimeError(NO_EXECUTABLE_ERR)
            optimizer.set_state_dict({**self._read_optimizer_state(), **torch.optim.Optimizer.state_dict(optimizer)})
            optimizer.ipu_state_is_dirty = False
        return optimizer.get_state_dict()

    def _write_optimizer_state_if_needed(self) -> None:
        optimizer = self._optimizer
        if not isinstance(optimizer, _PoptorchOptimizer) or not optimizer.ipu_state_is_dirty:
            return
        assert not optimizer.host_state_is_dirty, "Both host and ipu states cannot be dirty at the same time."
        if optimizer.has_state():
            assert self._device_optimizer is not None and self._device_model is not None
            state = optimizer._state_dict
            device_parameters = dict(self._device_model.named_parameters())
            with torch.no_grad():
                for name, weight in state["ipu_param"].items():
                    device_parameters[name].copy_(weight)
            self._device_optimizer.state.clear()
            for key, value in state["ipu_state"].items():
                name, _, state_key = key.rpartition("/")
                self._device_optimizer.state[self._updated[name]][state_key] = value.clone()
        optimizer.ipu_state_is_dirty = False

    @property
    def rng_state(self) -> List[int]:
        """The device's random seed and generator state, ``[seed, *state]`` (python/_poplar_executor.py
        `rng_state`: compiled models only; poptorch reads it from the device, the stand-in keeps it)."""
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        assert self._rng is not None
        return list(self._rng)

    @rng_state.setter
    def rng_state(self, state: List[int]) -> None:
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        self._rng = list(state)

    def isCompiled(self) -> bool:
        return self._device_model is not None

    def isAttachedToDevice(self) -> bool:
        return self.isCompiled() and self._attached

    def attachToDevice(self) -> None:
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        if self._attached:
            raise RuntimeError("Device is already attached")
        _IPU_POOL.acquire(self, self._ipus)  # CompilerImpl::attachToDevice creates the device again
        self._attached = True
        self._on_device_attach()

    def detachFromDevice(self) -> None:
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        if not self._attached:
            raise RuntimeError("Device is not attached")
        if self._training:  # read the weights and the optimizer state back before detaching
            self.copyWeightsToHost()
            assert self._optimizer is not None
            self._optimizer.state_dict()
        self._attached = False
        _IPU_POOL.release(self)

    def copyWeightsToHost(self) -> None:
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        assert self._device_model is not None
        with torch.no_grad():
            for host, device in zip(self._user_model.state_dict().values(), self._device_model.state_dict().values()):
                host.copy_(device)
        version = getattr(self._user_model, "_fake_host_weights_version", 0) + 1
        self._user_model._fake_host_weights_version = version  # type: ignore[assignment]
        self._host_weights_version = version

    def copyWeightsToDevice(self) -> None:
        if not self.isCompiled():
            raise RuntimeError(NO_EXECUTABLE_ERR)
        assert self._device_model is not None
        if self._optimizer is not None:
            self._optimizer.state_dict()  # poptorch syncs the optimizer state to the host first
        self._device_model.load_state_dict(self._user_model.state_dict())
        self._host_weights_version = getattr(self._user_model, "_fake_host_weights_version", 0)

    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:
        if not self._training:
            raise RuntimeError("setOptimizer: not a training model")
        self.set_optimizer_calls += 1
        _check_mandatory_group_attributes(optimizer)
        replaced = optimizer is not self._optimizer
        hyperparameters = [{key: copy.deepcopy(value) for key, value in group.items() if key != "params"} for group in optimizer.param_groups]
        if not replaced and isinstance(optimizer, _PoptorchOptimizer):
            # Attributes not given to the constructor are compiled in as constants.
            for old, new in zip(self._sent_hyperparameters, hyperparameters):
                for key, value in new.items():
                    if old.get(key) != value and optimizer.variable_attrs.isConstant(key) and key in optimizer.defaults:
                        raise ValueError(f"Attribute {key} is constant and cannot be changed: pass it to the optimizer's constructor to make it variable.")
        if self.isCompiled() and replaced:
            if isinstance(self._optimizer, _PoptorchOptimizer):
                self._optimizer_state_dict()  # read the old optimizer's state back before detaching it
                self._optimizer._read_from_device = None
            if isinstance(optimizer, _PoptorchOptimizer):
                optimizer.ipu_state_is_dirty = True
        if isinstance(optimizer, _PoptorchOptimizer):
            optimizer._read_from_device = self._optimizer_state_dict
        self._optimizer = optimizer
        self._sent_hyperparameters = hyperparameters
        if self.isCompiled():
            if replaced:
                self._replace_device_optimizer()
            else:
                assert self._device_optimizer is not None
                for group, hyper in zip(self._device_optimizer.param_groups, self._sent_hyperparameters):
                    group.update(copy.deepcopy(hyper))
            if self.isAttachedToDevice():
                self._write_optimizer_state_if_needed()

    def destroy(self) -> None:
        if not self.isCompiled():
            return
        if self._training:
            self.copyWeightsToHost()
            assert self._optimizer is not None
            self._optimizer.state_dict()  # sync the optimizer's state back to the host
            self._user_model._fake_poptorch_wrapped = False  # type: ignore[assignment]
        self._device_model = None
        self._device_optimizer = None
        self._input_spec = None
        self._rng = None
        self._attached = False
        _IPU_POOL.release(self)

    def __call__(self, *args: Any, **kwargs: torch.Tensor) -> Dict[str, torch.Tensor]:
        if self._options.offline_ipu_version is not None:  # python/_poplar_executor.py __call__
            raise AssertionError("Trying to run a model on an offline device (ConnectionType.Never): use "
                                 "model.compile(inputs) instead of model(inputs)")
        if args:
            raise NotImplementedError("the stand-in takes keyword inputs only")
        inputs = kwargs
        if not self.isCompiled():
            self.compile(**inputs)
        if not self._attached:
            self.attachToDevice()
        assert self._input_spec is not None and self._device_model is not None
        for key, value in inputs.items():
            shape, dtype = self._narrow(key, value)
            expected = self._input_spec.get(key)
            if expected is None or expected[0] != shape:
                raise ValueError(f"Shape mismatch for {key}: expected {expected and expected[0]} but got {shape}")
            if expected[1] != dtype:
                raise ValueError(f"Data type mismatch for {key}: expected {expected[1]} but got {dtype}")
        if inputs.keys() != self._input_spec.keys():
            raise ValueError("Number of arguments mismatch")
        if not self._training and self._host_weights_version != getattr(self._user_model, "_fake_host_weights_version", 0):
            self.copyWeightsToDevice()  # the training model moved the weights on; pick them up
        self._write_optimizer_state_if_needed()
        with torch.random.fork_rng(devices=[]):  # the device draws from its own generator, never the host's
            assert self._rng is not None
            torch.set_rng_state(torch.tensor(self._rng[1:], dtype=torch.uint8))
            outputs = self._run(inputs)
            self._rng = self._rng[:1] + torch.get_rng_state().tolist()
        if isinstance(self._optimizer, _PoptorchOptimizer):
            self._optimizer.host_state_is_dirty = True  # the device state moved on
        return outputs

    def _run(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        options = self._options
        di, r = options.device_iterations, options.replication_factor
        ga = options.Training.gradient_accumulation if self._training else 1
        micro = next(iter(inputs.values())).shape[0] // (di * ga * r)
        # [device_iteration][accumulation][replica][micro_batch]
        chunks = {key: value.reshape(di, ga, r, micro, *value.shape[1:]) for key, value in inputs.items()}
        model = self._device_model
        assert model is not None
        per_replica: List[List[Dict[str, torch.Tensor]]] = [[] for _ in range(r)]
        for d in range(di):
            if self._training:
                assert self._device_optimizer is not None
                model.zero_grad(set_to_none=True)
            for g in range(ga):
                for replica in range(r):
                    micro_inputs = {key: value[d, g, replica] for key, value in chunks.items()}
                    if self._training:
                        with _LossGraph() as graph:
                            outputs = model(**micro_inputs)
                        loss = graph.final_loss()
                        scale = getattr(self._device_optimizer, "loss_scaling", 1.0)
                        # The scale multiplies the loss's gradient, not the loss (PopART scales the
                        # backward pass: a half loss times the scale may overflow where its gradient does not).
                        loss.backward(torch.full_like(loss, scale / (ga * r)))
                    else:
                        with torch.no_grad():
                            outputs = model(**micro_inputs)
                    per_replica[replica].append({key: value.detach() for key, value in outputs.items()})
            if self._training:
                self._update()
        return self._reduce(per_replica)

    def _update(self) -> None:
        optimizer = self._device_optimizer
        assert optimizer is not None and self._device_model is not None
        device_parameters = dict(self._device_model.named_parameters())
        updated = [(device_parameters[name], tensor) for name, tensor in self._updated.items() if device_parameters[name].grad is not None]
        for weight, tensor in updated:
            if tensor is not weight:  # a half weight: update an fp32 copy of it
                tensor.data.copy_(weight.detach())
                tensor.grad = weight.grad.float()
        grads = [tensor.grad for _, tensor in updated]
        scale = getattr(optimizer, "loss_scaling", 1.0)
        if self._options.Training.auto_loss_scaling:
            next_scale = _automatic_loss_scale(scale, [(weight.dtype, weight.grad) for weight, _ in updated])
        for grad in grads:
            grad.div_(scale)
        max_norm = getattr(optimizer, "max_grad_norm", float("inf"))
        if max_norm != float("inf"):
            torch.nn.utils.clip_grad_norm_([tensor for _, tensor in updated], max_norm)
        optimizer.step()
        first = getattr(optimizer, "first_order_momentum_accum_type", None) or getattr(optimizer, "velocity_accum_type", torch.float32)
        second = getattr(optimizer, "second_order_momentum_accum_type", torch.float32)
        with torch.no_grad():
            for weight, tensor in updated:
                if tensor is not weight:
                    weight.copy_(tensor)  # rounds to fp16
                state = optimizer.state[tensor]
                for key, dtype in (("exp_avg", first), ("momentum_buffer", first), ("exp_avg_sq", second), ("square_avg", second)):
                    if isinstance(state.get(key), torch.Tensor) and state[key].dtype != dtype:
                        state[key].copy_(state[key].to(dtype))  # stored in the accumulation dtype
        if self._options.Training.auto_loss_scaling:
            optimizer.loss_scaling = next_scale  # the next update's scale; this one was applied whatever it held

    def _reduce(self, per_replica: List[List[Dict[str, torch.Tensor]]]) -> Dict[str, torch.Tensor]:
        mode = self._options.output_mode
        steps = len(per_replica[0])
        if mode == OutputMode.Final:
            indices = [steps - 1]
        elif mode == OutputMode.EveryN:
            # Every N-th global batch with all its accumulation steps (popart willow/include/popart/
            # dataflow.hpp, AnchorReturnTypeId::EveryN); step index = device_iteration × GA + g.
            period = self._options.output_return_period
            ga = self._options.Training.gradient_accumulation if self._training else 1
            indices = [index for index in range(steps) if (index // ga + 1) % period == 0]
        else:
            indices = list(range(steps))
        if mode == OutputMode.Sum:
            summed = []
            for outputs in per_replica:
                summed.append({key: torch.stack([entry[key] for entry in outputs]).sum(0) for key in outputs[0]})
            ordered = summed
        else:
            ordered = [per_replica[replica][index] for index in indices for replica in range(len(per_replica))]
        result = {}
        for key in ordered[0]:
            values = [entry[key] for entry in ordered]
            if len(values) == 1:
                result[key] = values[0]
            elif values[0].dim() == 0:
                result[key] = torch.stack(values)
            else:
                result[key] = torch.cat(values)
        return result


def trainingModel(model: torch.nn.Module, options: Optional[Options] = None, optimizer: Optional[torch.optim.Optimizer] = None) -> PoplarExecutor:
    if getattr(model, "_fake_poptorch_wrapped", False):
        raise RuntimeError("Model has already been wrapped in 'poptorch.trainingModel'. Call model.destroy() on the model wrapper before wrapping again.")
    model._fake_poptorch_wrapped = True  # type: ignore[assignment]
    if optimizer is None:
        optimizer = optim.SGD(model.parameters(), lr=0.01)
    return PoplarExecutor(model, options or Options(), True, optimizer)


def inferenceModel(model: torch.nn.Module, options: Optional[Options] = None) -> PoplarExecutor:
    options = options or Options()
    if options.Training.gradient_accumulation != 1:
        raise ValueError(
            "You must set poptorch.Options().Training.gradientAccumulation to 1 or use the default value of 1 "
            "for inference models."
        )
    return PoplarExecutor(model, options, False, None)


class DataLoader(torch.utils.data.DataLoader):
    """poptorch.DataLoader: batches of the combined size; drop_last defaults to True."""

    def __init__(self, options: Options, dataset: Any, batch_size: int = 1, shuffle: bool = False, num_workers: int = 0,
                 drop_last: bool = True, persistent_workers: Optional[bool] = None, auto_distributed_partitioning: bool = True,
                 mode: DataLoaderMode = DataLoaderMode.Sync, async_options: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        if mode != DataLoaderMode.Sync:
            raise NotImplementedError("the stand-in DataLoader reads synchronously only")
        options._frozen = True
        self.combinedBatchSize = batch_size * options.device_iterations * options.replication_factor * options.Training.gradient_accumulation
        if not drop_last and len(dataset) % self.combinedBatchSize:
            logger.warning(
                "The number of elements in the dataset (%d) is not divisible by the number of elements processed per "
                "step (%d) and drop_last=False. Last incomplete batch of size %d will be used.",
                len(dataset), self.combinedBatchSize, len(dataset) % self.combinedBatchSize,
            )
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=bool(shuffle), num_workers=num_workers, drop_last=drop_last, **kwargs)
