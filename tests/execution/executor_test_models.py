"""Small real models for the executor tests (plain torch, deterministic)."""

from __future__ import annotations

from typing import Dict

import torch

from ipuflow.execution import ipu_ops
from ipuflow.models.model import Model


class Regression(Model):
    """y = W x + b with a mean-squared-error loss; outputs ``prediction`` and ``loss``."""

    def __init__(self, features: int = 4, outputs: int = 2, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.linear = torch.nn.Linear(features, outputs)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(outputs, features, generator=generator))
            self.linear.bias.copy_(torch.randn(outputs, generator=generator))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        prediction = self.linear(x)
        return {"prediction": prediction, "loss": torch.nn.functional.mse_loss(prediction, y)}


class IdentityLossRegression(Regression):
    """The same model, marking its loss with ipu_ops.identity_loss under another name."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        prediction = self.linear(x)
        return {"prediction": prediction, "mse": ipu_ops.identity_loss((prediction - y) ** 2, "mean")}


class NoLoss(Regression):
    """Returns predictions only, even in training."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        return {"prediction": self.linear(x)}


class Echo(Model):
    """Returns its input (plus a scalar loss that is the input's mean), to check output modes."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        echoed = x * self.scale
        return {"echo": echoed, "loss": echoed.mean()}


def regression_batch(samples: int, features: int = 4, outputs: int = 2, seed: int = 1) -> Dict[str, torch.Tensor]:
    """A random regression batch of `samples` rows."""
    generator = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(samples, features, generator=generator), "y": torch.randn(samples, outputs, generator=generator)}
