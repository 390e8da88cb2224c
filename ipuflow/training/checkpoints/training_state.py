"""The training state a checkpoint holds: the `TrainerState` plus a named list of stateful parts
(executor, metric tracker, schedulers, ...), each saved and restored by one loop, so that every key
is written in one place."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Protocol

from ipuflow.config import ConfigurationError
from ipuflow.training.state.trainer_state import TrainerState

TRAINING_STATE_VERSION = 2
"""2: the `TrainerState` under ``trainer_state`` and one key per stateful part. 1 (ipuflow before
the event system) named 19 counters and parts at the top level; it is not read (see `check_version`)."""

TRAINER_STATE_KEY = "trainer_state"


class Stateful(Protocol):
    """Something whose state a checkpoint holds (a callback, a scheduler, ...)."""

    def state_dict(self) -> Any:
        """The state to checkpoint (plain containers and tensors)."""

    def load_state_dict(self, state_dict: Any) -> None:
        """Restore what `state_dict` returned."""


class StatefulPart(NamedTuple):
    """One piece of training state: its key in the checkpoint, how to read it and how to restore it."""

    name: str
    state_dict: Callable[[], Any]
    load_state_dict: Callable[[Any], None]


def collect_training_state(state: TrainerState, parts: List[StatefulPart]) -> Dict[str, Any]:
    """The training state to checkpoint: plain containers and tensors (``torch.load(weights_only=True)``)."""
    training_state: Dict[str, Any] = {"version": TRAINING_STATE_VERSION, TRAINER_STATE_KEY: state.to_dict()}
    for part in parts:
        training_state[part.name] = part.state_dict()
    return training_state


def check_version(training_state: Dict[str, Any], where: str) -> None:
    """Refuse a training state written in another layout, saying which."""
    version = training_state.get("version")
    if version != TRAINING_STATE_VERSION:
        raise ConfigurationError(
            f"The checkpoint in {where} has training-state version {version!r}; this ipuflow reads version "
            f"{TRAINING_STATE_VERSION}. Finish the run with the ipuflow that wrote it, or start it over with --force."
        )


def restore_training_state(training_state: Dict[str, Any], parts: List[StatefulPart], where: str) -> TrainerState:
    """Restore every part from `training_state` (in list order) and return its `TrainerState`.

    A part the checkpoint does not hold (a scheduler added to the config since) keeps its fresh state.
    """
    check_version(training_state, where)
    try:
        state = TrainerState.from_dict(training_state[TRAINER_STATE_KEY])
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigurationError(f"The checkpoint in {where} holds no readable trainer state ({error}).") from None
    for part in parts:
        if training_state.get(part.name) is not None:
            part.load_state_dict(training_state[part.name])
    return state
