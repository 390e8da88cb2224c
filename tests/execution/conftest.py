"""Fixtures for the executor contract tests: the same tests run on every backend."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import pytest
import torch

from ipuflow.execution import StepExecutor


def _backends() -> list:
    backends = ["native", "poptorch"]
    return backends


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A backend name; for ``poptorch`` the stand-in module is injected as `poptorch`."""
    if request.param == "poptorch":
        from tests.execution import fake_poptorch

        monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    return request.param


@pytest.fixture
def build(backend: str) -> Callable[..., StepExecutor]:
    """Build an executor of the current backend from a model, optimizer and options."""

    def make(model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, **options: Any) -> StepExecutor:
        if backend == "native":
            options.setdefault("device", "cpu")
        return StepExecutor.by_name(backend)(model=model, optimizer=optimizer, **options)

    return make


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The poptorch stand-in (tests/execution/fake_poptorch.py) injected as `poptorch`."""
    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
