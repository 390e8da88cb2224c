"""The torch RNG states an executor checkpoints, as plain tensors (loadable with weights_only=True)."""

from __future__ import annotations

from typing import Any, Dict

import torch


def get_rng_states(device: torch.device) -> Dict[str, Any]:
    """The CPU generator's state and, for a CUDA executor, every CUDA generator's state."""
    states: Dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.type == "cuda" and torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: Dict[str, Any]) -> None:
    """Restore what `get_rng_states` returned (CUDA states only where CUDA is available)."""
    if "cpu" in states:
        torch.set_rng_state(states["cpu"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
