"""The host's random number generators (Python's, NumPy's legacy global one, torch's CPU one) as
plain values for a checkpoint (loadable with ``torch.load(weights_only=True)``), so that a resumed run
draws the same numbers as an uninterrupted one. The executor checkpoints the device's generators."""

from __future__ import annotations

import random
from typing import Any, Dict, List

import numpy
import torch


def _python_state() -> List[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def _set_python_state(state: List[Any]) -> None:
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


def _numpy_state() -> List[Any]:
    name, keys, position, has_gauss, cached = numpy.random.get_state(legacy=True)
    return [name, numpy.asarray(keys).tolist(), int(position), int(has_gauss), float(cached)]


def _set_numpy_state(state: List[Any]) -> None:
    name, keys, position, has_gauss, cached = state
    numpy.random.set_state((name, numpy.asarray(keys, dtype=numpy.uint32), position, has_gauss, cached))


class HostRngState:
    """A checkpointable view of the host's global generators (it holds nothing itself)."""

    def state_dict(self) -> Dict[str, Any]:
        """Every generator's state now."""
        return {"python": _python_state(), "numpy": _numpy_state(), "torch": torch.get_rng_state()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Put every generator back where `state_dict` found it."""
        _set_python_state(state["python"])
        _set_numpy_state(state["numpy"])
        torch.set_rng_state(state["torch"])
