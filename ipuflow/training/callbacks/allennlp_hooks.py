"""AllenNLP 2.10's callback hooks (`on_start`, `on_backward`, `on_batch`, `on_epoch`, `on_end`) run
unchanged on the trainer's one event dispatch: a callback that overrides them is heard through
`AllenNlpHooksAdapter`, as `BatchCallback` and `EpochCallback` are."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from ipuflow.training.events.event import VALIDATION, TrainerEvent

ALLENNLP_HOOKS: Tuple[str, ...] = ("on_start", "on_backward", "on_batch", "on_epoch", "on_end")
"""AllenNLP 2.10 `TrainerCallback`'s hooks, each taking the trainer first (docs/training.md says
which event calls each)."""


class BackwardAlreadyCalled(RuntimeError):
    """An AllenNLP `on_backward` hook said it ran backward, which the executor had already done."""


class AllenNlpHooksAdapter:
    """Calls a callback's AllenNLP hooks from the events, with AllenNLP 2.10's arguments:

    - `on_start(trainer, is_primary=...)` at `on_train_begin` (also when resuming, as in AllenNLP);
    - `on_backward(trainer, batch_outputs, backward_called=True)` after each training host call: the
      executor has run backward on the device, so a hook that would run it again must return False
      (AllenNLP's contract when `backward_called` is true); True is an error;
    - `on_batch(trainer, [batch], [outputs], batch_metrics, epoch, batch_number, is_training=...,
      is_primary=..., batch_grad_norm=None)` after each training host call (one combined batch; the
      logs as `batch_metrics` at logging points, else `{}`, so that no hook forces a device sync) and
      each validation batch;
    - `on_epoch(trainer, metrics=..., epoch=..., is_primary=...)` at `on_epoch_end`;
    - `on_end(trainer, metrics=..., epoch=..., is_primary=...)` at `on_train_end`, also after an error
      (then `metrics` is None).
    """

    EVENTS = {"on_start": ("on_train_begin",), "on_backward": ("on_step_end",),
              "on_batch": ("on_step_end", "on_prediction_step"), "on_epoch": ("on_epoch_end",),
              "on_end": ("on_train_end",)}

    def __init__(self, callback: Any, hooks: List[str]) -> None:
        self.callback = callback
        self.hooks = hooks

    def listeners(self) -> List[Tuple[str, Callable[[TrainerEvent], None]]]:
        """(event name, listener) for every event one of the hooks needs."""
        events = {event for hook in self.hooks for event in self.EVENTS[hook]}
        return [(event, getattr(self, event)) for event in sorted(events)]

    def on_train_begin(self, event: TrainerEvent) -> None:
        self.callback.on_start(event.trainer, is_primary=event.is_primary)

    def on_step_end(self, event: TrainerEvent) -> None:
        if "on_backward" in self.hooks and self.callback.on_backward(event.trainer, event.outputs, True):
            raise BackwardAlreadyCalled(
                f"{type(self.callback).__qualname__}.on_backward returned True (it ran backward), but the executor "
                "runs forward, backward and the optimizer step on the device: a hook called with "
                "backward_called=True must not run backward again. Drop the backward from the hook; loss scaling "
                "is the executor's precision/loss_scaling."
            )
        if "on_batch" in self.hooks:
            assert event.epoch is not None and event.batch_number is not None
            self.callback.on_batch(event.trainer, [event.batch], [event.outputs], event.logs or {}, event.epoch,
                                   event.batch_number, is_training=True, is_primary=event.is_primary,
                                   batch_grad_norm=None)

    def on_prediction_step(self, event: TrainerEvent) -> None:
        if event.split == VALIDATION:
            assert event.epoch is not None and event.batch_number is not None
            self.callback.on_batch(event.trainer, [event.batch], [event.outputs], {}, event.epoch,
                                   event.batch_number, is_training=False, is_primary=event.is_primary,
                                   batch_grad_norm=None)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        assert event.metrics is not None and event.epoch is not None
        self.callback.on_epoch(event.trainer, metrics=event.metrics, epoch=event.epoch, is_primary=event.is_primary)

    def on_train_end(self, event: TrainerEvent) -> None:
        self.callback.on_end(event.trainer, metrics=event.metrics, epoch=event.epoch, is_primary=event.is_primary)
