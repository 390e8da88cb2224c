"""The execution options both backends share, validated once, and the batching plan they imply.

`ExecutionOptions` holds the config values as given (training and ``inference_*`` twins);
`BatchingPlan` is what one host call does in the executor's mode (training or inference): how many
device iterations, accumulation steps and replicas, and which micro-batch outputs come back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List, Optional

from ipuflow.config import ConfigurationError, validators

OUTPUT_MODES = ("final", "all", "sum", "every_n")
PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class BatchingPlan:
    """What one host call does: the split of the combined batch and which outputs come back.

    The combined batch is split ``[device_iteration][accumulation][replica][micro_batch]``; a
    training call performs `device_iterations` updates, each on ``gradient_accumulation ×
    replication_factor`` micro-batches with gradients mean-reduced.
    """

    training: bool
    device_iterations: int
    gradient_accumulation: int
    replication_factor: int
    output_mode: str
    output_period: int

    @property
    def batch_size_factor(self) -> int:
        """Samples per host call divided by the micro-batch size."""
        return self.device_iterations * self.gradient_accumulation * self.replication_factor

    @property
    def steps_per_replica(self) -> int:
        """Micro-batches each replica runs per call (device iterations × accumulation)."""
        return self.device_iterations * self.gradient_accumulation

    @property
    def micro_batches_per_update(self) -> int:
        """Micro-batches whose gradients are mean-reduced into one update (GA × R)."""
        return self.gradient_accumulation * self.replication_factor

    def kept_steps(self) -> List[bool]:
        """For each per-replica step index ``d × GA + g``, whether the output mode returns it.

        ``sum`` keeps every step (they are summed); ``final`` only the last; ``every_n`` every step
        of device iterations N-1, 2N-1, ... (PopART's EveryN counts global batches, one per update,
        and returns all their accumulation steps); ``all`` every step.
        """
        steps = self.steps_per_replica
        if self.output_mode == "final":
            return [index == steps - 1 for index in range(steps)]
        if self.output_mode == "every_n":
            return [(index // self.gradient_accumulation + 1) % self.output_period == 0 for index in range(steps)]
        return [True] * steps

    def check_batch_size(self, key: str, size: int) -> int:
        """The micro-batch size of a combined batch whose input `key` has dim 0 = `size`."""
        factor = self.batch_size_factor
        if size % factor != 0 or size == 0:
            raise ValueError(
                f"Invalid batch dimension: in the input {key!r}, the batch dimension ({size}) must be a "
                f"multiple of device_iterations ({self.device_iterations}) × replication_factor "
                f"({self.replication_factor}) × gradient_accumulation ({self.gradient_accumulation}) = "
                f"{factor}, because one host call runs that many micro-batches. Set the loader's "
                f"batch size factor with executor.prepare(loader)."
            )
        return size // factor


@dataclass(frozen=True)
class ExecutionOptions:
    """The shared executor options as configured, validated; `plan` resolves them for a mode."""

    training: bool = True
    device_iterations: int = 1
    gradient_accumulation: int = 1
    replication_factor: int = 1
    output_mode: Optional[str] = None
    output_period: int = 1
    precision: str = "fp32"
    loss_scaling: Optional[float] = None
    auto_loss_scaling: bool = False
    max_grad_norm: Optional[float] = None
    max_grad_value: Optional[float] = None
    seed: Optional[int] = None
    inference_device_iterations: Optional[int] = None
    inference_replication_factor: Optional[int] = None
    inference_output_mode: Optional[str] = None

    def __post_init__(self) -> None:
        for key in ("device_iterations", "gradient_accumulation", "replication_factor", "output_period"):
            validators.positive_int(key, getattr(self, key))
        for key in ("inference_device_iterations", "inference_replication_factor"):
            validators.positive_int(key, getattr(self, key), optional=True)
        for key in ("output_mode", "inference_output_mode"):
            validators.choice(key, getattr(self, key), OUTPUT_MODES, optional=True)
        validators.choice("precision", self.precision, PRECISIONS)
        validators.positive_number("loss_scaling", self.loss_scaling, optional=True)
        validators.boolean("auto_loss_scaling", self.auto_loss_scaling)
        for key in ("max_grad_norm", "max_grad_value"):
            validators.positive_number(key, getattr(self, key), optional=True)
        validators.optional_int("seed", self.seed)
        # PopART's DataFlow::isValidAnchorReturnPeriod: N must divide the global batches per call.
        for plan in (self.plan_for(True), self.plan_for(False)):
            if plan.output_mode == "every_n" and plan.device_iterations % plan.output_period != 0:
                mode = "training" if plan.training else "inference"
                raise ConfigurationError(
                    f"output mode 'every_n' needs output_period to divide the {mode} device_iterations "
                    f"({plan.device_iterations}), found {plan.output_period}: like PopART, it returns every N-th "
                    "global batch (all the micro-batches of one update), so N counts device iterations.",
                    key="output_period",
                )

    @property
    def plan(self) -> BatchingPlan:
        """The batching plan for this executor's mode (`plan_for`)."""
        return self.plan_for(self.training)

    def plan_for(self, training: bool) -> BatchingPlan:
        """The batching plan for training or inference: inference uses the ``inference_*`` values when
        given, no gradient accumulation, and output mode ``all`` unless `inference_output_mode` says otherwise."""
        if training:
            return BatchingPlan(
                training=True,
                device_iterations=self.device_iterations,
                gradient_accumulation=self.gradient_accumulation,
                replication_factor=self.replication_factor,
                output_mode=self.output_mode or "final",
                output_period=self.output_period,
            )
        return BatchingPlan(
            training=False,
            device_iterations=self.inference_device_iterations or self.device_iterations,
            gradient_accumulation=1,
            replication_factor=self.inference_replication_factor or self.replication_factor,
            output_mode=self.inference_output_mode or "all",
            output_period=self.output_period,
        )

    def as_inference(self) -> "ExecutionOptions":
        """The same options for an inference executor (no seeding: the model is shared)."""
        return dataclasses.replace(self, training=False, seed=None)
