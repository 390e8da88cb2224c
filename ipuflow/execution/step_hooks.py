"""Calls from inside a training host call, around each optimizer update (the Hugging Face Trainer's
`on_pre_optimizer_step`, `on_optimizer_step` and `on_substep_end`)."""

from __future__ import annotations


class StepHooks:
    """What an executor calls inside a training host call. `update` counts the call's optimizer
    updates from 0; every method is a no-op unless overridden.

    An executor given no hooks (`set_step_hooks(None)`, the default) runs its step without them, so
    the step pays for them only when a listener exists.
    """

    def before_update(self, update: int) -> None:
        """The update's gradients are accumulated, unscaled and clipped; the optimizer has not stepped."""

    def after_update(self, update: int) -> None:
        """The optimizer stepped (a dynamic loss scaler may have skipped a non-finite step)."""

    def after_substep(self, update: int) -> None:
        """One accumulation step of the update (every replica's micro-batch) ran its backward, and
        the update is not complete: gradients are accumulating, the optimizer does not step yet."""
