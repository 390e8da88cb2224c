"""The Metric base class: accumulates a measure over batches on the host side of training."""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ipuflow.config import Registrable


class Metric(Registrable):
    """A measure accumulated over batches. Built-ins: `categorical_accuracy`, `f1`,
    `mean_absolute_error`.

    `get_metric` returns values keyed by a suffix for the name the model gives the metric: the
    empty suffix is the metric's main value (`"accuracy"`), others are appended with an underscore
    (`"f1_fresh"`). Metric state stays on the device of the predictions and is read (synchronised)
    only by `get_metric`. Gold values and masks may be on another device (a model's `update_metrics`
    sees its outputs on the executor's device and the batch on the host): they are moved to the
    predictions' device.
    """

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch; rows where `mask` is false are skipped."""
        raise NotImplementedError

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """The values accumulated since the last reset (then reset, if `reset`)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget everything accumulated."""
        raise NotImplementedError

    def state_dict(self) -> Dict[str, Any]:
        """What has been accumulated, as plain containers and CPU tensors (checkpointed by the
        trainer, so a run resumed mid-epoch reports the same metrics as one that was not stopped).

        The default saves every instance attribute whose value is a number, string, bool, None, a
        tensor, or a list/tuple/dict of those; a metric holding anything else must override this
        and `load_state_dict`."""
        state: Dict[str, Any] = {}
        for name, value in vars(self).items():
            if not _is_checkpointable(value):
                raise NotImplementedError(
                    f"{type(self).__name__}.state_dict: the default Metric.state_dict saves attributes that are "
                    f"numbers, strings, tensors or lists/dicts of them, but self.{name} is a {type(value).__name__}. "
                    f"Override state_dict and load_state_dict in {type(self).__name__} to checkpoint its state."
                )
            state[name] = _to_cpu(value)
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from what `state_dict` returned (the default sets the saved attributes back;
        tensors return to the device of the attribute they replace)."""
        for name, value in state.items():
            current = getattr(self, name, None)
            if isinstance(value, torch.Tensor) and isinstance(current, torch.Tensor):
                value = value.to(current.device)
            setattr(self, name, value)


_PLAIN = (int, float, bool, str, type(None), torch.Tensor)


def _is_checkpointable(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_checkpointable(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, (str, int)) and _is_checkpointable(item) for key, item in value.items())
    return False


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_to_cpu(item) for item in value)
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    return value


def beside(predictions: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`values` on the device of `predictions`: a host tensor is copied without waiting for the
    device (the copy is queued on the current stream, ahead of the work that reads it)."""
    if values.device == predictions.device:
        return values
    return values.to(predictions.device, non_blocking=True)
