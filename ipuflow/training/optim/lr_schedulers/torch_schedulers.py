"""Epoch-based schedules that wrap `torch.optim.lr_scheduler`: step, multi_step, exponential and
reduce_on_plateau."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import torch

from ipuflow.config import ConfigurationError
from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler


class _TorchEpochScheduler(LearningRateScheduler):
    """Steps a torch scheduler once per epoch."""

    def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1) -> None:
        super().__init__(optimizer, last_epoch)
        self.torch_scheduler: Any = None

    def get_values(self) -> List[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self, metric: Optional[float] = None) -> None:
        self.last_epoch += 1
        self.metric = metric
        self.torch_scheduler.step()

    def state_dict(self) -> Dict[str, Any]:
        return {"last_epoch": self.last_epoch, "metric": self.metric, "torch": self.torch_scheduler.state_dict()}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.last_epoch = state_dict["last_epoch"]
        self.metric = state_dict["metric"]
        self.torch_scheduler.load_state_dict(state_dict["torch"])


@LearningRateScheduler.register("step")
class StepLearningRateScheduler(_TorchEpochScheduler):
    """Multiply the lr by `gamma` every `step_size` epochs (`torch.optim.lr_scheduler.StepLR`)."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.torch_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)


@LearningRateScheduler.register("multi_step")
class MultiStepLearningRateScheduler(_TorchEpochScheduler):
    """Multiply the lr by `gamma` at each epoch in `milestones` (`MultiStepLR`)."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, milestones: List[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        super().__init__(optimizer, last_epoch)
        self.torch_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=gamma)


@LearningRateScheduler.register("exponential")
class ExponentialLearningRateScheduler(_TorchEpochScheduler):
    """Multiply the lr by `gamma` every epoch (`ExponentialLR`)."""

    def __init__(self, optimizer: torch.optim.Optimizer, gamma: float = 0.1, last_epoch: int = -1) -> None:
        super().__init__(optimizer, last_epoch)
        self.torch_scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)


def _single_signed_metric(validation_metric: Union[str, List[str]]) -> Optional[str]:
    metrics = [validation_metric] if isinstance(validation_metric, str) else list(validation_metric)
    return metrics[0] if len(metrics) == 1 else None


@LearningRateScheduler.register("reduce_on_plateau")
class ReduceOnPlateauLearningRateScheduler(_TorchEpochScheduler):
    """Multiply the lr by `factor` when the validation metric stops improving (`ReduceLROnPlateau`).

    The trainer injects `validation_metric`; `mode` follows its sign (``-loss`` → ``min`` on the
    loss, ``+accuracy`` → ``max``), fixing AllenNLP's inverted default. For a list of metrics the
    schedule watches their signed sum in ``max`` mode. A `mode` that contradicts the sign is an error.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        validation_metric: Union[str, List[str]] = "-loss",
        mode: Optional[str] = None,
        factor: float = 0.1,
        patience: int = 10,
        threshold_mode: str = "rel",
        threshold: float = 1e-4,
        cooldown: int = 0,
        min_lr: Union[float, List[float]] = 0.0,
        eps: float = 1e-8,
        last_epoch: int = -1,
    ) -> None:
        super().__init__(optimizer, last_epoch)
        single = _single_signed_metric(validation_metric)
        # The trainer passes the signed score (higher is better); for one metric we undo the sign
        # so that `threshold` is relative to the metric the user named, as in torch.
        self._sign = -1.0 if single is not None and single.startswith("-") else 1.0
        derived_mode = "min" if self._sign < 0 else "max"
        if mode is not None and mode != derived_mode:
            raise ConfigurationError(
                f"{mode!r} contradicts trainer.validation_metric {validation_metric!r}, which asks for "
                f"{derived_mode!r}; leave mode out to derive it.",
                key="mode",
            )
        self.mode = derived_mode
        self.torch_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode=derived_mode,  # type: ignore[arg-type]  # "min" or "max", checked above
            factor=factor,
            patience=patience,
            threshold_mode=threshold_mode,  # type: ignore[arg-type]  # "rel" or "abs", checked above
            threshold=threshold,
            cooldown=cooldown,
            min_lr=min_lr,
            eps=eps,
        )

    def step(self, metric: Optional[float] = None) -> None:
        if metric is None:
            raise ConfigurationError(
                "reduce_on_plateau needs a validation metric every epoch; give the trainer a validation_data_loader.",
                path="trainer.learning_rate_scheduler",
            )
        self.last_epoch += 1
        self.metric = metric
        self.torch_scheduler.step(self._sign * metric)
