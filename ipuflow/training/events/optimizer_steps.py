"""The Hugging Face Trainer's events from inside a host call: `on_pre_optimizer_step`,
`on_optimizer_step` and `on_substep_end`, fired by the executor's step through `StepHooks`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ipuflow.execution.step_hooks import StepHooks

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView

OPTIMIZER_STEP_EVENTS = ("on_pre_optimizer_step", "on_optimizer_step", "on_substep_end")
"""The events that fire inside the executor's step; an executor is given hooks only if one has a listener."""


class OptimizerStepEvents(StepHooks):
    """Fires the optimizer-step events through `fire` (the trainer's dispatch).

    During them `state.global_step` counts the updates made before this one (as in the Hugging Face
    Trainer, which counts an update after `on_optimizer_step`), also for a later update of a host
    call with several `device_iterations`; `event.epoch` and `event.batch_number` are the running
    host call's.
    """

    def __init__(self, trainer: "TrainerView", fire: Callable[..., None]) -> None:
        self._trainer = trainer
        self._fire = fire

    def before_update(self, update: int) -> None:
        self._fire_at("on_pre_optimizer_step", update)

    def after_update(self, update: int) -> None:
        self._fire_at("on_optimizer_step", update)

    def after_substep(self, update: int) -> None:
        self._fire_at("on_substep_end", update)

    def _fire_at(self, name: str, update: int) -> None:
        state = self._trainer.state
        updates_before_call = state.global_step
        state.global_step = updates_before_call + update
        try:
            self._fire(name, epoch=state.epochs_completed, batch_number=state.batches_in_epoch_completed + 1)
        finally:
            state.global_step = updates_before_call
