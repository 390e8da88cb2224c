"""The step-executor contract the trainer drives: one host call, many micro-batches, several updates.

Semantics are poptorch's for every backend (design.md §5):

* one training call consumes ``micro_batch × device_iterations × replication_factor ×
  gradient_accumulation`` samples, split ``[device_iteration][accumulation][replica][micro_batch]``,
  and performs ``device_iterations`` optimizer updates with gradients mean-reduced;
* hyperparameters (learning rate, momentum, ...) reach the device only through `set_optimizer`;
* inputs have fixed shapes after `compile`; a mismatch is an error, not a recompile;
* outputs are reduced by the output mode (``final`` by default in training, ``all`` in inference).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Mapping, Optional

import torch

from ipuflow.config import Registrable
from ipuflow.data.collate import DEFAULT_LENGTH_MULTIPLE

if TYPE_CHECKING:
    from ipuflow.data.loader import DataLoader
    from ipuflow.execution.options import ExecutionOptions
    from ipuflow.execution.step_hooks import StepHooks

COMPILE_IGNORED_WARNING = "Call to compile() ignored: the executable is already compiled"
"""What every backend warns when `compile` is called again with the signature it already has (poptorch's words)."""

Batch = Mapping[str, Any]
"""A combined batch: tensor values with dim 0 = the combined batch size, passed as model(**batch)."""


@dataclass
class StepResult:
    """What one host call returns.

    `outputs` holds the model's outputs reduced by the output mode (``loss`` included, shaped as
    poptorch returns it). `loss` is the mean loss over every micro-batch the call ran, a 0-d tensor
    left on the device so that reading it (and synchronising) is the caller's choice. On the poptorch
    backend the device returns only what the output mode keeps, so `loss` is the mean of that.
    """

    outputs: Dict[str, torch.Tensor]
    loss: Optional[torch.Tensor]
    optimizer_updates: int
    samples: int


def require_optimizer_for(model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer], training: bool) -> None:
    """A training executor needs an optimizer over the model's own parameters; inference takes none."""
    from ipuflow.config import ConfigurationError

    if not training:
        if optimizer is not None:
            raise ConfigurationError("An inference executor (training=False) takes no optimizer.")
        return
    if optimizer is None:
        raise ConfigurationError(
            "A training executor needs an optimizer: build it with optimizer=... (the trainer injects it)."
        )
    model_parameters = {id(parameter) for parameter in model.parameters()}
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if id(parameter) not in model_parameters:
                raise ConfigurationError("The executor's optimizer holds parameters that are not the model's.")


def compiled_shapes_reason(executor_name: str) -> str:
    """Why the executor registered as `executor_name` needs fixed input shapes, in words."""
    return f"the {executor_name} executor runs programs compiled for fixed input shapes"


class StepExecutor(Registrable):
    """Runs a model (and, in training, its optimizer) one combined batch per host call.

    Built from the trainer's ``executor`` config block with ``model`` and ``optimizer`` injected;
    ``training`` selects a training or an inference executor. Implementations: ``native`` (default,
    CPU/CUDA with plain PyTorch) and ``poptorch`` (Graphcore IPUs).
    """

    default_implementation: ClassVar[Optional[str]] = "native"

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Optional[torch.optim.Optimizer] = None,
        training: bool = True,
        device_iterations: int = 1,
        gradient_accumulation: int = 1,
        replication_factor: int = 1,
        output_mode: Optional[str] = None,
        output_period: int = 1,
        precision: str = "fp32",
        loss_scaling: Optional[float] = None,
        auto_loss_scaling: bool = False,
        max_grad_norm: Optional[float] = None,
        max_grad_value: Optional[float] = None,
        seed: Optional[int] = None,
        inference_device_iterations: Optional[int] = None,
        inference_replication_factor: Optional[int] = None,
        inference_output_mode: Optional[str] = None,
    ) -> None:
        """The options every backend shares (each backend adds its own keys).

        device_iterations: optimizer updates per host call (training), micro-batches per replica (inference).
        gradient_accumulation: micro-batches per update; gradients are mean-reduced.
        replication_factor: data-parallel replicas; each update sees all replicas' micro-batches.
        output_mode: which micro-batches' outputs come back: final (training default), all (inference default), sum, every_n.
        output_period: N for every_n: every N-th device iteration (global batch) returns all its micro-batches (PopART); N divides device_iterations.
        precision: fp32, bf16 or fp16.
        loss_scaling: a static loss scale (the initial one with auto_loss_scaling).
        auto_loss_scaling: automatic loss scaling: native skips a non-finite step (GradScaler); poptorch uses PopART's, which never skips one.
        max_grad_norm: global-norm clipping of the reduced gradient.
        max_grad_value: clamps each entry of the reduced, unscaled gradient to [-v, v] (before max_grad_norm).
        seed: seeds the device's random numbers (and torch's, as poptorch's randomSeed does).
        inference_device_iterations: device_iterations of the inference executor (default: device_iterations).
        inference_replication_factor: replication_factor of the inference executor.
        inference_output_mode: output_mode of the inference executor (default: all).
        """
        from ipuflow.execution.options import ExecutionOptions

        self._options = ExecutionOptions(
            training=training,
            device_iterations=device_iterations,
            gradient_accumulation=gradient_accumulation,
            replication_factor=replication_factor,
            output_mode=output_mode,
            output_period=output_period,
            precision=precision,
            loss_scaling=loss_scaling,
            auto_loss_scaling=auto_loss_scaling,
            max_grad_norm=max_grad_norm,
            max_grad_value=max_grad_value,
            seed=seed,
            inference_device_iterations=inference_device_iterations,
            inference_replication_factor=inference_replication_factor,
            inference_output_mode=inference_output_mode,
        )
        self._plan = self._options.plan
        require_optimizer_for(model, optimizer, training)

    def set_step_hooks(self, hooks: Optional["StepHooks"]) -> None:
        """Call `hooks` around every optimizer update of a training call (None: no hooks). Only
        backends that run the update loop on the host can; the others refuse, since a program that
        runs a whole host call on the device cannot stop between its updates."""
        from ipuflow.config import ConfigurationError

        if hooks is not None:
            name = StepExecutor.registered_name(type(self)) or type(self).__name__
            raise ConfigurationError(
                f"the {name} executor runs a host call's optimizer updates on the device, so "
                "on_pre_optimizer_step, on_optimizer_step and on_substep_end cannot fire between them; remove "
                "the callbacks that override these events, or use the native executor.", key="callbacks")

    @classmethod
    def check_optimizer(cls, optimizer_class: type, max_grad_norm: Optional[float]) -> None:
        """Raise a ConfigurationError if this backend cannot run `optimizer_class` (checked from the
        config before any data is read); every optimizer runs on the native backend."""

    @classmethod
    def check_model(cls, model_class: type, model_config: Mapping[str, Any]) -> None:
        """Raise a ConfigurationError if this backend cannot run the model `model_config` (a config
        block of `model_class`) describes (checked from the config before any data is read); the
        native backend runs every model."""

    @classmethod
    def check_available(cls) -> None:
        """Raise a ConfigurationError if this backend cannot be used here (checked before any data is
        read by the commands that run it); the native backend always can."""

    @property
    def training(self) -> bool:
        """Whether calls train (forward, backward, update) or only run forward."""
        return self._plan.training

    @property
    def options(self) -> "ExecutionOptions":
        """The validated options shared by every backend (batching, precision, loss scaling)."""
        return self._options

    @property
    def batch_size_factor(self) -> int:
        """Samples per host call divided by the micro-batch size."""
        return self._plan.batch_size_factor

    @property
    def updates_per_call(self) -> int:
        """Optimizer updates one training call performs (device_iterations); 0 in inference."""
        return self._plan.device_iterations if self._plan.training else 0

    @property
    def device(self) -> torch.device:
        """Where the model's weights live while attached (the host device for poptorch)."""
        raise NotImplementedError

    def inference_executor(self) -> "StepExecutor":
        """An inference executor over the same model, with this executor's inference options."""
        raise NotImplementedError

    def compile(self, sample_batch: Batch) -> None:
        """Fix the input spec (structure, shapes, dtypes) from a combined batch; idempotent."""
        raise NotImplementedError

    def __call__(self, batch: Batch) -> StepResult:
        """Run one host call on a combined batch, compiling first if needed."""
        raise NotImplementedError

    def accepts(self, batch: Batch) -> bool:
        """Whether `batch` has a compiled signature (a call would run without compiling)."""
        raise NotImplementedError

    @property
    def fixed_shapes_reason(self) -> Optional[str]:
        """Why this executor needs inputs of fixed shapes (a few, compiled ahead), or None if it runs
        batches of any sequence length (then the data loader pads each batch to its own longest list)."""
        return compiled_shapes_reason(StepExecutor.registered_name(type(self)) or type(self).__name__)

    @property
    def length_multiple(self) -> int:
        """The multiple this executor's device runs sequence lengths best at, for batches padded to
        their own longest list."""
        return DEFAULT_LENGTH_MULTIPLE

    def prepare(self, loader: "DataLoader", compile: bool = True) -> None:
        """Fit `loader` to this executor: its combined batches take this executor's batch-size factor
        (so `len(loader)` counts host calls) and its padding the shapes this executor takes
        (`fixed_shapes_reason`, `length_multiple`), and, unless `compile` is false, every batch shape
        it can yield is compiled now (`compile_for`)."""
        loader.set_batch_size_factor(self.batch_size_factor)
        loader.set_length_multiple(self.length_multiple)
        loader.set_fixed_shapes(self.fixed_shapes_reason)
        if compile:
            self.compile_for(loader)

    def compile_for(self, loader: "DataLoader") -> None:
        """Compile for every batch shape `loader` can yield (one per length bucket) before the first
        call, so that a later bucket is not mistaken for a wrong input. A backend that holds one
        executable raises here, at the start, when the loader has several shapes."""
        for sample in loader.shape_samples():
            if not self.accepts(sample):
                self.compile(sample)

    def compile_ahead(self, loader: "DataLoader") -> str:
        """Compile now, without running a step, everything this backend compiles for the batch
        shapes `loader` yields (``ipuflow train --compile-only``); returns what was compiled, in words.
        Weights, optimizer state and random-number states are left as they were."""
        raise NotImplementedError

    def set_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Send the optimizer's current hyperparameters (e.g. a new learning rate) to the device."""
        raise NotImplementedError

    def copy_weights_to_host(self) -> None:
        """Make the host model's weights current (before saving or evaluating on the host)."""
        raise NotImplementedError

    def copy_weights_to_device(self) -> None:
        """Upload weights changed on the host (e.g. after loading a checkpoint)."""
        raise NotImplementedError

    def attach(self) -> None:
        """Acquire the device again after `detach`."""
        raise NotImplementedError

    def detach(self) -> None:
        """Release the device, keeping weights and optimizer state on the host."""
        raise NotImplementedError

    @property
    def is_attached(self) -> bool:
        """Whether the executor holds its device."""
        raise NotImplementedError

    @property
    def is_compiled(self) -> bool:
        """Whether `compile` has fixed the input spec."""
        raise NotImplementedError

    def destroy(self) -> None:
        """Copy weights to host and free the device and the compiled program for good."""
        raise NotImplementedError

    def state_dict(self) -> Dict[str, Any]:
        """Backend-neutral state: optimizer state, loss-scaler state and RNG states."""
        raise NotImplementedError

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        raise NotImplementedError
