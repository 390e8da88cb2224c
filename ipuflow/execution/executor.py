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

if TYPE_CHECKING:
    from ipuflow.execution.options import ExecutionOptions

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


class StepExecutor(Registrable):
    """Runs a model (and, in training, its optimizer) one combined batch per host call.

    Built from the trainer's ``executor`` config block with ``model`` and ``optimizer`` injected;
    ``training`` selects a training or an inference executor. Implementations: ``native`` (default,
    CPU/CUDA with plain PyTorch) and ``poptorch`` (Graphcore IPUs).
    """

    default_implementation: ClassVar[Optional[str]] = "native"

    # The concrete classes define __init__ with the shared options (device_iterations,
    # gradient_accumulation, replication_factor, output_mode, output_period, precision,
    # loss_scaling, auto_loss_scaling, max_grad_norm, seed) and their own.

    @property
    def training(self) -> bool:
        """Whether calls train (forward, backward, update) or only run forward."""
        raise NotImplementedError

    @property
    def options(self) -> "ExecutionOptions":
        """The validated options shared by every backend (batching, precision, loss scaling)."""
        raise NotImplementedError

    @property
    def batch_size_factor(self) -> int:
        """Samples per host call divided by the micro-batch size."""
        raise NotImplementedError

    @property
    def updates_per_call(self) -> int:
        """Optimizer updates one training call performs (device_iterations); 0 in inference."""
        raise NotImplementedError

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

    def compile_for(self, loader: Any) -> None:
        """Compile for every batch shape `loader` can yield (one per length bucket) before the first
        call, so that a later bucket is not mistaken for a wrong input. A backend that holds one
        executable raises here, at the start, when the loader has several shapes."""
        for sample in loader.shape_samples():
            if not self.accepts(sample):
                self.compile(sample)

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
