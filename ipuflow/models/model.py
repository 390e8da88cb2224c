"""The Model base class: a registrable torch module that computes its own loss."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Dict, Mapping, Optional, Tuple

import torch

from ipuflow.config import Registrable
from ipuflow.data.collate import IGNORE_LABEL

if TYPE_CHECKING:
    from ipuflow.execution.pipeline_layout import PipelineLayout

__all__ = ["IGNORE_LABEL", "Model"]  # IGNORE_LABEL belongs to the data; models (and plugins) read it here too


class Model(torch.nn.Module, Registrable):
    """A registrable `torch.nn.Module` whose `forward(**batch)` returns a dict of tensors.

    In training the dict holds a scalar ``loss`` (the executors need the model to compute its own
    loss, as poptorch does). `forward` stays a pure tensor computation so it can be compiled;
    metrics are updated on the host from the outputs, through `update_metrics`.
    """

    default_predictor: ClassVar[Optional[str]] = None
    """The name of the `Predictor` that `ipuflow predict` uses for this model by default."""

    def forward(self, **batch: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        """The model's outputs for a batch; ``loss`` when the batch carries targets."""
        raise NotImplementedError

    def host_driven_evaluation(self) -> Optional[Tuple[str, str]]:
        """(config key, what it does) when this model's evaluation forward runs a loop whose length
        and stop depend on the values it computes (autoregressive generation), which an executor
        that compiles one static graph (poptorch) cannot run; None for a pure tensor computation."""
        return None

    @classmethod
    def host_driven_evaluation_in(cls, config: Mapping[str, Any]) -> Optional[Tuple[str, str]]:
        """`host_driven_evaluation` as the model's config block (its keys as written) already says,
        before the model is built, so that a run is refused before it reads any data."""
        return None

    def pipeline_layout(self) -> Optional["PipelineLayout"]:
        """The model's parts as an IPU pipeline places them (embeddings on IPU 0, layers spread by
        `layers_per_ipu`, heads on the last IPU), so that the poptorch executor places it without
        `pipeline_layers`; None when the model does not say. Asked only when a replica spans several
        IPUs or every layer is checkpointed; a ConfigurationError here names the key to set instead."""
        return None

    def get_regularization_penalty(self) -> Optional[torch.Tensor]:
        """A scalar added to the training loss (AllenNLP's regularizers), or None; the trainer adds it
        in the forward pass and logs it as ``reg_loss``. Override it to regularize."""
        return None

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        """Accumulate metrics from outputs that cover every row of `batch` (rows with
        `IGNORE_LABEL` targets are padding and must be skipped). `outputs` are on the executor's
        device and `batch` is on the host; ipuflow's metrics take gold values from either."""

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """Metrics accumulated since the last reset."""
        return {}

    def metrics_state_dict(self) -> Dict[str, Any]:
        """The metrics' accumulated state as plain containers and CPU tensors, so that a run
        resumed mid-epoch reports the same metrics as one that was not stopped."""
        return {}

    def load_metrics_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue accumulating from what `metrics_state_dict` returned."""

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Turn a batch of outputs into per-instance, JSON-friendly values (labels for ids, ...)."""
        return {key: value.tolist() if isinstance(value, torch.Tensor) else value for key, value in outputs.items()}
