"""The native step executor: poptorch's batching semantics with plain PyTorch on CPU or CUDA."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import warnings
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterator, List, Mapping, Optional, Tuple, Union

import torch

from ipuflow import distributed
from ipuflow.config import ConfigurationError, validators
from ipuflow.distributed.data_parallel import SHARDED_MARK, ReplicaGroup, mean_over_ranks, require_sharding, update_contexts
from ipuflow.distributed.process_group import BACKENDS, rank_device
from ipuflow.distributed.replicas import replicated_options
from ipuflow.data.collate import DEFAULT_LENGTH_MULTIPLE
from ipuflow.execution.cpu_threads import AUTO, follow_checkpoint_threads, set_cpu_threads
from ipuflow.execution.executor import COMPILE_IGNORED_WARNING, Batch, StepExecutor, StepResult, require_optimizer_for
from ipuflow.execution.input_spec import InputSpec
from ipuflow.execution.memory_and_math import enable_gradient_checkpointing, enable_tf32
from ipuflow.execution.precision import LossScaler, autocast_factory
from ipuflow.execution.replica_rng import ReplicaRandomStreams
from ipuflow.execution.rng import get_rng_states, set_rng_states
from ipuflow.execution.step_hooks import StepHooks
from ipuflow.execution.step_outputs import OutputCollector, find_loss
from ipuflow.torch_features import require_torch_compile

if TYPE_CHECKING:
    from ipuflow.data.loader import DataLoader

NO_EXECUTABLE_ERROR = "Model has not been compiled or has been destroyed."
"""poptorch's text for attach/detach on an executor without a compiled program."""

# Reused for every micro-batch that draws from the process's own stream (no allocation per call).
_OWN_STREAM = contextlib.nullcontext()


def resolve_device(device: str) -> torch.device:
    """The torch device for the ``device`` option: ``auto`` (CUDA if present), ``cpu``, ``cuda[:N]``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        index_text = device[5:]
        if index_text and not index_text.isdigit():
            raise ConfigurationError(key="device", expected="'auto', 'cpu', 'cuda' or 'cuda:N'", found=device)
        if not torch.cuda.is_available():
            raise ConfigurationError(f"{device!r} was asked for, but torch sees no CUDA device.", key="device")
        index = int(index_text) if index_text else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise ConfigurationError(
                f"{device!r} was asked for, but there are {torch.cuda.device_count()} CUDA devices.", key="device"
            )
        return torch.device("cuda", index)
    raise ConfigurationError(key="device", expected="'auto', 'cpu', 'cuda' or 'cuda:N'", found=device)


def hyperparameter_names(optimizer: torch.optim.Optimizer) -> FrozenSet[str]:
    """The param-group keys that are hyperparameters: ``lr`` and the constructor arguments of the
    optimizer's classes (what a user or a scheduler sets). Other group values (a schedule-free
    optimizer's ``k``, D-Adaptation's ``d``) are running values the optimizer maintains itself."""
    names = {"lr"}
    for cls in type(optimizer).__mro__:
        if cls is torch.optim.Optimizer or not issubclass(cls, torch.optim.Optimizer):
            break
        init = cls.__dict__.get("__init__")
        if init is not None:
            parameters = inspect.signature(init).parameters.values()
            names.update(p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    names.difference_update(("self", "params"))
    return frozenset(names)


def _same_value(a: Any, b: Any) -> bool:
    """Whether two param-group values are equal (tensors by value)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a is b or a == b


def snapshot_hyperparameters(optimizer: torch.optim.Optimizer, names: Optional[FrozenSet[str]] = None) -> List[Dict[str, Any]]:
    """A copy of every param group's hyperparameters (`hyperparameter_names` unless `names` is given)."""
    if names is None:
        names = hyperparameter_names(optimizer)
    return [{key: _copied(value) for key, value in group.items() if key in names} for group in optimizer.param_groups]


# Values that cannot change in place need no copy (copy.copy of each, at every schedule step, cost
# more than the rest of set_optimizer).
_IMMUTABLE = (bool, int, float, str, type(None), tuple, frozenset)


def _copied(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    return value if type(value) in _IMMUTABLE else copy.copy(value)


def _updated_parameters(optimizer: Optional[torch.optim.Optimizer]) -> List[torch.nn.Parameter]:
    """The parameters `optimizer` updates, in group order (none without an optimizer)."""
    if optimizer is None:
        return []
    return [parameter for group in optimizer.param_groups for parameter in group["params"]]


def _options_per_rank(options: Dict[str, Any], world_size: int, sharding: Optional[str]) -> Dict[str, Any]:
    """The shared options as one rank of `world_size` runs them under torchrun."""
    resolved = replicated_options(options, world_size)
    if sharding == "fsdp" and resolved.get("auto_loss_scaling"):
        raise ConfigurationError(
            "not available with sharding 'fsdp': each rank holds only a shard of the gradients, whose overflow "
            "checks would disagree; use a static loss_scaling, or bf16 (no scaling needed)", key="auto_loss_scaling")
    return resolved


def _check_native_options(distributed_backend: str, sharding: Optional[str], compile: Union[bool, Dict[str, Any]]) -> None:
    """Refuse an unknown backend, sharding or compile option (also in one process: a typo shows before torchrun)."""
    validators.choice("distributed_backend", distributed_backend, BACKENDS)
    require_sharding(sharding)
    if not isinstance(compile, (bool, dict)):
        raise ConfigurationError(key="compile", expected="true, false or a dict of torch.compile options", found=compile)
    if compile is not False:
        require_torch_compile(key="compile")


@StepExecutor.register("native")
class NativeExecutor(StepExecutor):
    """Runs poptorch's host-call semantics with plain PyTorch, eager or `torch.compile`d.

    `device` is ``auto``, ``cpu`` or ``cuda[:N]``. `compile` is false, true, or a dict of
    `torch.compile` options (``mode: "reduce-overhead"`` uses CUDA graphs on CUDA); shapes stay
    static. In one process, replicas are simulated one after another on the one device, sharing
    the weights; under torchrun each process (rank) runs one replica on its own device, and the
    gradients are reduced across ranks once per optimizer update (`distributed_backend`: ``auto``,
    ``gloo`` or ``nccl``; `sharding`: null/``ddp`` or ``fsdp``; `find_unused_parameters` for models
    whose forward leaves some parameters without a gradient). The other options are described on
    `StepExecutor` and in docs/execution.md.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Optional[torch.optim.Optimizer] = None,
        device: str = "auto",
        compile: Union[bool, Dict[str, Any]] = False,
        distributed_backend: str = "auto",
        sharding: Optional[str] = None,
        find_unused_parameters: bool = False,
        num_threads: Any = AUTO,  # an int, "auto" or null: set_cpu_threads words a bad value
        gradient_checkpointing: bool = False,
        tf32: bool = False,
        **options: Any,
    ) -> None:
        """device: auto (CUDA if present), cpu, cuda or cuda:N; under torchrun, cuda:LOCAL_RANK.
        compile: false, true, or a dict of torch.compile options.
        distributed_backend: under torchrun, the process group's backend: auto (nccl on CUDA, gloo on CPU), gloo or nccl.
        sharding: under torchrun, null or ddp (every rank holds the whole model) or fsdp (FSDP2 shards it).
        find_unused_parameters: under torchrun, let DDP handle parameters that get no gradient in a forward.
        num_threads: torch's CPU threads: an int; "auto", one per core other jobs leave idle; null, torch's default.
        gradient_checkpointing: in training, recompute activations in the backward pass (the model's own
            gradient_checkpointing_enable) to save memory.
        tf32: on CUDA, let float32 matrix multiplications use TF32.
        """
        set_cpu_threads(num_threads)
        context = distributed.current()
        if context is not None:
            options = _options_per_rank(options, context.world_size, sharding)
        super().__init__(model, optimizer, **options)
        _check_native_options(distributed_backend, sharding, compile)
        self._device_option = device
        self._compile_option = compile
        self._distributed_options: Dict[str, Any] = {"distributed_backend": distributed_backend, "sharding": sharding,
                                                     "find_unused_parameters": find_unused_parameters}
        self._context = context
        self._ranks = 1 if context is None else context.world_size  # processes sharing each host call
        # What this process runs of each host call: all replicas, or under torchrun its own one.
        self._local_plan = self._plan if context is None else dataclasses.replace(self._plan, replication_factor=1)
        self._device = resolve_device(device) if context is None else rank_device(device, context)
        if self._options.seed is not None:
            # poptorch's randomSeed seeds torch as well; dropout masks then repeat run to run.
            torch.manual_seed(self._options.seed)
        self._model = self._placed_model(model)
        self._use_memory_and_math(gradient_checkpointing, tf32)
        self._optimizer = optimizer
        self._moves_inputs = self._device.type != "cpu"
        self._autocast = autocast_factory(self._options.precision, self._device.type)
        self._scaler = LossScaler(self._device.type, self._options.loss_scaling, self._options.auto_loss_scaling,
                                  self._local_plan.micro_batches_per_update)
        self._track_hyperparameters(optimizer)
        self._set_up_replicas(optimizer, sharding, find_unused_parameters)
        # Read once the replicas are set up: sharding replaces the parameters the optimizer holds.
        self._parameters: List[torch.nn.Parameter] = _updated_parameters(optimizer)
        self._forward: Any = self._module
        self._spec: Optional[InputSpec] = None
        self._any_lengths = False  # set by prepare: the loader pads each batch to its own longest list
        self._attached = False
        self._inference: Optional[NativeExecutor] = None
        self._step_hooks: Optional[StepHooks] = None
        self._substep_ends: FrozenSet[int] = frozenset()

    # -- construction steps --------------------------------------------------------------------

    def _placed_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model on this executor's device."""
        # Module.to keeps a plain parameter's identity, so an optimizer built before stays valid; it
        # would replace an FSDP-sharded model's parameters, so a model already in place is left alone.
        in_place = all(tensor.device == self._device for tensor in (*model.parameters(), *model.buffers()))
        return model if in_place else model.to(self._device)

    def _use_memory_and_math(self, gradient_checkpointing: bool, tf32: bool) -> None:
        """Turn on gradient checkpointing (in training) and TF32 matmuls where asked."""
        if gradient_checkpointing and self.training:
            enable_gradient_checkpointing(self._model)
        if tf32:
            enable_tf32(self._device)
        self._tf32 = tf32

    def _track_hyperparameters(self, optimizer: Optional[torch.optim.Optimizer]) -> None:
        """Note the optimizer's hyperparameter names and their current values (every update of a call applies them; set_optimizer replaces them)."""
        self._hyperparameter_names: FrozenSet[str] = hyperparameter_names(optimizer) if optimizer is not None else frozenset()
        self._hyperparameters: List[Dict[str, Any]] = (
            snapshot_hyperparameters(optimizer, self._hyperparameter_names) if optimizer is not None else []
        )

    def _set_up_replicas(self, optimizer: Optional[torch.optim.Optimizer], sharding: Optional[str],
                         find_unused_parameters: bool) -> None:
        """The replica group under torchrun (DDP or FSDP around the model), or the random streams of the
        replicas one process simulates, and the module the step runs."""
        context = self._context
        self._group: Optional[ReplicaGroup] = None
        if context is not None and self.training:
            self._group = ReplicaGroup(self._model, optimizer, context, sharding, find_unused_parameters)
        # One process simulating replicas draws each one's random numbers as its rank would under torchrun.
        self._replica_streams = ReplicaRandomStreams(self._plan.replication_factor, self._device) if (
            context is None and self.training and self._plan.replication_factor > 1) else None
        self._module: torch.nn.Module = self._group.module if self._group is not None else self._model
        self._update_contexts = update_contexts(self._group, self._local_plan.micro_batches_per_update)

    # -- properties --------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        """The device holding the model's weights."""
        return self._device

    @property
    def model(self) -> torch.nn.Module:
        """The model this executor runs (the same object it was given)."""
        return self._model

    @property
    def loss_scale(self) -> Optional[float]:
        """The current loss scale (None without loss scaling); reads the device when dynamic."""
        return self._scaler.scale

    def inference_executor(self) -> "NativeExecutor":
        """An inference executor over the same model (built once), with the inference options."""
        if not self.training:
            return self
        if self._inference is None:
            self._inference = NativeExecutor(
                model=self._model,
                device=self._device_option,
                compile=self._compile_option,
                tf32=self._tf32,
                num_threads=None,  # the training executor set this process's threads already
                **self._distributed_options,
                **dataclasses.asdict(self._options.as_inference()),
            )
        return self._inference

    # -- compile and call ----------------------------------------------------------------------

    def compile(self, sample_batch: Batch) -> None:
        """Fix the input spec from a combined batch (and wrap the model in `torch.compile` if asked).

        Compiling again with the same signature warns and does nothing, as poptorch does; another
        signature that differs only outside dim 0 (a length bucket) is added to the spec.
        """
        if self._spec is not None:
            if not self._spec.add(sample_batch, self._local_plan):
                warnings.warn(COMPILE_IGNORED_WARNING, stacklevel=2)
            return
        self._spec = InputSpec(sample_batch, self._local_plan, any_lengths=self._any_lengths)
        if self._compile_option is not False and self._forward is self._module:
            options = {} if self._compile_option is True else dict(self._compile_option)
            options.setdefault("dynamic", False)
            self._forward = torch.compile(self._module, **options)
        self._attached = True

    def accepts(self, batch: Batch) -> bool:
        """Whether `batch` has a compiled signature (a call would run without compiling)."""
        return self._spec is not None and self._spec.matches(batch)

    @property
    def fixed_shapes_reason(self) -> Optional[str]:
        """Why inputs need fixed shapes: with `compile`, torch.compile builds a graph per shape; None eagerly."""
        if self._compile_option is False:
            return None
        return "the native executor with compile builds a torch.compile graph for every input shape"

    @property
    def length_multiple(self) -> int:
        """8 on CUDA (tensor cores take lengths in multiples of 8); 1 elsewhere: a CPU pays for every
        padded position and runs any length as fast."""
        return DEFAULT_LENGTH_MULTIPLE if self._device.type == "cuda" else 1

    def prepare(self, loader: "DataLoader", compile: bool = True) -> None:
        """Fit `loader` to this executor (see `StepExecutor.prepare`); eagerly, batches padded to their
        own longest list are then taken at any sequence length."""
        super().prepare(loader, compile=False)
        self._any_lengths = loader.pads_to_longest
        if self._spec is not None:
            self._spec.any_lengths = self._any_lengths
        if compile:
            self.compile_for(loader)

    def compile_for(self, loader: "DataLoader") -> None:
        """Compile for every batch shape `loader` yields; under torchrun, first make the loader give
        only this rank's replica's rows of each combined batch."""
        if self._context is not None:
            loader.select_replica(self._context.rank, self._context.world_size)
        super().compile_for(loader)

    def compile_ahead(self, loader: "DataLoader") -> str:
        """Fix the input spec for every shape of `loader` and, with `compile`, have `torch.compile`
        build its graphs now: one forward (and, in training, backward) per shape, on the first
        micro-batch, with no optimizer step; weights, buffers, gradients and RNG states are restored."""
        self.compile_for(loader)
        samples = loader.shape_samples()
        if self._compile_option is False:
            return "nothing to compile: executor.compile is false, so PyTorch runs eagerly (input shapes fixed only)"
        # Compiling runs the model: keep what a forward/backward would change (BatchNorm statistics,
        # dropout's random numbers, gradients) as it was, since no training happened.
        state = copy.deepcopy(self._model.state_dict())
        rng = get_rng_states(self._device)
        was_training = self._model.training
        try:
            for sample in samples:
                self._run_for_compile(sample)
        finally:
            self._model.load_state_dict(state)
            set_rng_states(rng)
            self._model.train(was_training)
            for parameter in self._model.parameters():
                parameter.grad = None
        passes = "forward and backward" if self.training else "forward"
        return f"torch.compile built the {passes} graphs for {len(samples)} input shape(s)"

    def _run_for_compile(self, sample: Batch) -> None:
        """One forward (and backward in training) of `sample`'s first micro-batch through the
        compiled model, in the same grad and autocast modes as a real call, so the graphs match."""
        _, _, micro_batch = next(self._micro_batches(sample))
        if self._moves_inputs:
            micro_batch = {key: value.to(self._device) for key, value in micro_batch.items()}
        self._model.train(self.training)
        with torch.set_grad_enabled(self.training), self._autocast():
            outputs = self._forward(**micro_batch)
        if self.training:
            loss = find_loss(outputs, training=True, model=self._model)
            assert loss is not None  # find_loss raises in training when the model returns no loss
            loss.backward()

    def __call__(self, batch: Batch) -> StepResult:
        """Run one host call on a combined batch (CPU tensors), compiling first if needed."""
        spec = self._spec
        if spec is None:
            self.compile(batch)
            spec = self._spec
            assert spec is not None
        elif not spec.matches(batch):
            spec.check(batch)
        if not self._attached:
            self.attach()
        if self._moves_inputs:
            device = self._device
            batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
        plan = self._local_plan
        if self._model.training != plan.training:
            # The training and inference executors share one model; its mode follows the caller.
            self._model.train(plan.training)
        if plan.training:
            return self._train(batch, spec.combined_batch)
        with torch.no_grad():
            return self._infer(batch, spec.combined_batch)

    def _micro_batches(self, batch: Mapping[str, torch.Tensor]) -> Iterator[Tuple[int, int, Mapping[str, torch.Tensor]]]:
        """(step, replica, micro-batch) in the order ``[device_iteration × accumulation][replica]``."""
        plan = self._local_plan
        if plan.batch_size_factor == 1:
            yield 0, 0, batch
            return
        steps, replicas = plan.steps_per_replica, plan.replication_factor
        # Views, not copies: [combined, ...] → [steps, replicas, micro_batch, ...].
        split = {key: value.view(steps, replicas, -1, *value.shape[1:]) for key, value in batch.items()}
        for step in range(steps):
            for replica in range(replicas):
                yield step, replica, {key: value[step, replica] for key, value in split.items()}

    def _train(self, batch: Mapping[str, torch.Tensor], samples: int) -> StepResult:
        plan = self._local_plan
        optimizer = self._optimizer
        assert optimizer is not None
        forward, autocast, scaler = self._forward, self._autocast, self._scaler
        max_grad_norm, max_grad_value = self._options.max_grad_norm, self._options.max_grad_value
        collector = OutputCollector(plan)
        micro_batches = self._micro_batches(batch)
        update_contexts, streams, hooks = self._update_contexts, self._replica_streams, self._step_hooks
        host_values = [{key: group[key] for key in snapshot if key in group}
                       for group, snapshot in zip(optimizer.param_groups, self._hyperparameters)]
        try:
            for update in range(plan.device_iterations):
                # Every update of the call runs with the values sent by set_optimizer, whatever a
                # step hook or the optimizer itself wrote into the groups during the last one.
                self._apply_hyperparameters(optimizer)
                optimizer.zero_grad(set_to_none=True)
                for index, reduction in enumerate(update_contexts):
                    step, replica, micro_batch = next(micro_batches)
                    # Under torchrun the gradients are reduced across ranks on the update's last micro-batch only.
                    with reduction(), streams.drawing_for(replica) if streams is not None else _OWN_STREAM:
                        with autocast():
                            outputs = forward(**micro_batch)
                        loss = find_loss(outputs, training=True, model=self._model)
                        scaler.backward(loss)  # type: ignore[arg-type]  # find_loss raises in training if there is none
                    collector.add(step, replica, outputs, loss)
                    if hooks is not None and index in self._substep_ends:
                        hooks.after_substep(update)
                scaler.unscale_(optimizer, self._gradients)
                # Clipping sees the reduced gradient with the loss scale divided out (a dynamic
                # scaler has already noted any overflow, which clamping must not hide).
                if max_grad_value is not None:
                    torch.nn.utils.clip_grad_value_(self._parameters, max_grad_value)
                if max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(self._parameters, max_grad_norm)
                if hooks is not None:
                    hooks.before_update(update)
                scaler.step(optimizer)
                if hooks is not None:
                    hooks.after_update(update)
        finally:
            self._restore_host_values(optimizer, host_values)
        return StepResult(collector.outputs(), mean_over_ranks(collector.mean_loss(), self._context),
                          plan.device_iterations, samples * self._ranks)

    def _infer(self, batch: Mapping[str, torch.Tensor], samples: int) -> StepResult:
        collector = OutputCollector(self._local_plan)
        forward, autocast = self._forward, self._autocast
        for step, replica, micro_batch in self._micro_batches(batch):
            with autocast():
                outputs = forward(**micro_batch)
            collector.add(step, replica, outputs, find_loss(outputs, training=False, model=self._model))
        if getattr(self._model, SHARDED_MARK, False):
            # FSDP keeps the root's gathered parameters after a forward without backward; shard them
            # again, so the model's parameters are the ones the optimizer holds.
            self._model.reshard()  # type: ignore[operator]
        return StepResult(collector.outputs(), collector.mean_loss(), 0, samples * self._ranks)

    def _gradients(self) -> List[torch.Tensor]:
        return [parameter.grad for parameter in self._parameters if parameter.grad is not None]

    def _apply_hyperparameters(self, optimizer: torch.optim.Optimizer) -> None:
        """Put the snapshot taken at `set_optimizer` into the param groups.

        The user's optimizer object may have been changed by a scheduler since; the device (here:
        this call) sees new values only after `set_optimizer`, as on poptorch. Tensor values are
        copied, so that an in-place change during the update leaves the snapshot intact.
        """
        for group, snapshot in zip(optimizer.param_groups, self._hyperparameters):
            for key, value in snapshot.items():
                group[key] = value.clone() if isinstance(value, torch.Tensor) else value

    def _restore_host_values(self, optimizer: torch.optim.Optimizer, host_values: List[Dict[str, Any]]) -> None:
        """After a call, give the host object back the values it held before the call, except
        where the call itself (a step hook, the optimizer's own step) wrote a new value: that one
        stays on the host, to reach the device with the next `set_optimizer`."""
        for group, snapshot, before in zip(optimizer.param_groups, self._hyperparameters, host_values):
            for key, value in before.items():
                current = group[key]
                if current is value or _same_value(current, snapshot[key]):
                    group[key] = value

    def set_step_hooks(self, hooks: Optional[StepHooks]) -> None:
        """Call `hooks` around every optimizer update of a training call, and after every accumulation
        step that does not end one (None: the step runs without them)."""
        if hooks is not None and not self.training:
            raise RuntimeError("set_step_hooks: an inference executor makes no optimizer updates.")
        self._step_hooks = hooks
        # Micro-batches run [accumulation][replica]: an accumulation step ends with its last replica's.
        replicas, micro_batches = self._local_plan.replication_factor, len(self._update_contexts)
        self._substep_ends = frozenset(index for index in range(replicas - 1, micro_batches - 1, replicas))

    # -- poptorch's PoplarExecutor surface -------------------------------------------------------

    def set_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Take the optimizer's current hyperparameters (and the optimizer, if another object)."""
        if not self.training:
            raise RuntimeError("set_optimizer: an inference executor has no optimizer.")
        if optimizer is not self._optimizer:
            require_optimizer_for(self._model, optimizer, True)
            self._optimizer = optimizer
            self._parameters = _updated_parameters(optimizer)
            self._hyperparameter_names = hyperparameter_names(optimizer)
        self._hyperparameters = snapshot_hyperparameters(optimizer, self._hyperparameter_names)

    def copy_weights_to_host(self) -> None:
        """Nothing to do: the model's parameters are the weights the native executor updates."""

    def copy_weights_to_device(self) -> None:
        """Nothing to do: the native executor reads the model's parameters directly."""

    def attach(self) -> None:
        """Mark the executor as holding its device again (poptorch's errors when not detached)."""
        if self._spec is None:
            raise RuntimeError(NO_EXECUTABLE_ERROR)
        if self._attached:
            raise RuntimeError("Device is already attached")
        self._attached = True

    def detach(self) -> None:
        """Mark the device as released; weights and optimizer state stay where they are."""
        if self._spec is None:
            raise RuntimeError(NO_EXECUTABLE_ERROR)
        if not self._attached:
            raise RuntimeError("Device is not attached")
        self._attached = False

    @property
    def is_attached(self) -> bool:
        """Whether the executor holds its device (False before compile, as poptorch)."""
        return self._spec is not None and self._attached

    @property
    def is_compiled(self) -> bool:
        """Whether `compile` has fixed the input spec (and `destroy` has not dropped it)."""
        return self._spec is not None

    @property
    def input_spec(self) -> Optional[InputSpec]:
        """The compiled input spec, None before compile."""
        return self._spec

    def destroy(self) -> None:
        """Drop the compiled spec and program; the next call compiles again."""
        if self._spec is None:
            return
        self._spec = None
        self._attached = False
        self._forward = self._module

    def state_dict(self) -> Dict[str, Any]:
        """Optimizer state, the hyperparameters in use, loss-scaler state, torch RNG states and, on
        CPU, the number of torch threads the training ran with."""
        return {
            "optimizer": self._optimizer.state_dict() if self._optimizer is not None else None,
            "hyperparameters": copy.deepcopy(self._hyperparameters),
            "loss_scaler": self._scaler.state_dict(),
            "rng": get_rng_states(self._device),
            **({} if self._replica_streams is None else {"replica_rng": self._replica_streams.state_dict()}),
            **({"cpu_threads": torch.get_num_threads()} if self._device.type == "cpu" else {}),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned (optimizer state lands on the parameters' device)."""
        if state.get("optimizer") is not None:
            if self._optimizer is None:
                raise ValueError("load_state_dict: the state holds optimizer state, but this executor has no optimizer.")
            self._optimizer.load_state_dict(state["optimizer"])
        if state.get("hyperparameters"):
            names = self._hyperparameter_names
            self._hyperparameters = [{key: value for key, value in group.items() if key in names}
                                     for group in copy.deepcopy(state["hyperparameters"])]
        self._scaler.load_state_dict(state.get("loss_scaler") or {})
        set_rng_states(state.get("rng") or {})
        if self._replica_streams is not None and state.get("replica_rng") is not None:
            self._replica_streams.load_state_dict(state["replica_rng"])
        saved_threads, threads = state.get("cpu_threads"), torch.get_num_threads()
        if self._device.type == "cpu" and saved_threads is not None and saved_threads != threads \
                and not follow_checkpoint_threads(saved_threads):
            # oneMKL's sgemm splits its sums by the thread count, so the order of float additions changes.
            warnings.warn(
                f"The checkpoint was written with {saved_threads} CPU threads and this process runs {threads}: "
                "torch's CPU matrix products round differently with another thread count, so the resumed weights "
                "will differ from an uninterrupted run's in the last bits. For a bitwise resume set "
                f"trainer.executor.num_threads: {saved_threads} (or OMP_NUM_THREADS={saved_threads}).",
                stacklevel=2,
            )
