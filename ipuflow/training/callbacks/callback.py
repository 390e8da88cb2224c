"""The trainer's callback interface: one method per event, each taking the event object."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ipuflow.config import Registrable
from ipuflow.training.callbacks.allennlp_hooks import ALLENNLP_HOOKS, AllenNlpHooksAdapter
from ipuflow.training.events.control import TrainerControl
from ipuflow.training.events.event import EVENTS, TrainerEvent
from ipuflow.training.state.trainer_state import is_primary

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView

__all__ = ["TrainerCallback", "TrainerControl", "TrainerEvent"]

class TrainerCallback(Registrable):
    """Hooks into the training loop. Override the events you need; each receives one
    `TrainerEvent` (`event.trainer`, `event.state`, `event.control` and the event's payload).

    When each event fires, and what `state.global_step` it sees under device iterations, is in
    docs/training.md. `serialization_dir` is injected. `state_dict` is saved in checkpoints and
    handed back to `load_state_dict` by list position on resume. `trainer` is set when the
    callback joins a trainer.

    A callback written for AllenNLP 2.10 (overriding `on_start`, `on_backward`, `on_batch`,
    `on_epoch`, `on_end`, each taking the trainer first) runs unchanged: the dispatch calls those
    hooks from the events (see `AllenNlpHooksAdapter`).
    """

    def __init__(self, serialization_dir: str) -> None:
        self.serialization_dir = serialization_dir
        self.trainer: Optional["TrainerView"] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, method in cls.__dict__.items():
            if (name.startswith("on_") and callable(method) and hasattr(TrainerCallback, name)
                    and name not in ALLENNLP_HOOKS):
                positional = [p for p in inspect.signature(method).parameters.values()
                              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                if len(positional) != 2:
                    raise TypeError(
                        f"{cls.__qualname__}.{name} must take (self, event): every TrainerCallback hook "
                        "receives one TrainerEvent (see docs/training.md, Callbacks)."
                    )

    def listeners(self) -> List[Tuple[str, Callable[[TrainerEvent], None]]]:
        """(event name, listener) for the dispatch: each event method the class overrides, then its
        AllenNLP 2.10 hooks' listeners (after the callback's own listener of the same event).

        Only overridden methods are listed, so that an event nobody listens to costs nothing."""
        own = [(name, getattr(self, name)) for name in EVENTS if overrides(type(self), name)]
        hooks = [name for name in ALLENNLP_HOOKS if overrides(type(self), name)]
        return own + (AllenNlpHooksAdapter(self, hooks).listeners() if hooks else [])

    @property
    def is_primary(self) -> bool:
        """Whether this process writes files and logs (always, outside distributed runs)."""
        return is_primary()

    def on_init_end(self, event: TrainerEvent) -> None:
        """The trainer is built (every part constructed, nothing restored yet)."""

    def on_train_begin(self, event: TrainerEvent) -> None:
        """`train()` starts (also when resuming: the state is the restored one)."""

    def on_epoch_begin(self, event: TrainerEvent) -> None:
        """An epoch's first (or, resumed, next) host call is about to run; `event.epoch`."""

    def on_step_begin(self, event: TrainerEvent) -> None:
        """A training host call is about to run; `event.batch`, `epoch`, `batch_number`."""

    def on_substep_end(self, event: TrainerEvent) -> None:
        """Inside a training host call (native executor only): an accumulation step ran its backward
        and the update is not complete. See `on_pre_optimizer_step` for what the event holds."""

    def on_pre_optimizer_step(self, event: TrainerEvent) -> None:
        """Inside a training host call (native executor only): the update's gradients are reduced,
        unscaled and clipped, and the optimizer is about to step. `state.global_step` counts the
        updates before this one; `event.epoch` and `batch_number` are the running host call's. A
        callback overriding it (or the two others) makes the poptorch executor refuse the run."""

    def on_optimizer_step(self, event: TrainerEvent) -> None:
        """Inside a training host call (native executor only): the optimizer stepped (gradients are still there)."""

    def on_step_end(self, event: TrainerEvent) -> None:
        """A training host call ran its optimizer updates; `event.outputs` stay on the device and
        `event.logs` is set only at logging points and after each epoch's first call (so that no
        callback forces a device sync, and the progress bar has a loss from the epoch's start)."""

    def on_log(self, event: TrainerEvent) -> None:
        """The running training metrics were read: `event.logs` (`loss`, `batch_loss`, `lr`...)."""

    def on_prediction_step(self, event: TrainerEvent) -> None:
        """A validation or test batch ran (`event.split`); `event.outputs`, `batch`, `batch_number`."""

    def on_evaluate(self, event: TrainerEvent) -> None:
        """A validation ended (epoch ends and `validation_interval`): `event.metrics`."""

    def on_save(self, event: TrainerEvent) -> None:
        """A checkpoint was written: `event.paths` (model, training state)."""

    def on_epoch_end(self, event: TrainerEvent) -> None:
        """An epoch's metrics file is written and its schedulers stepped: `event.metrics`."""

    def on_train_end(self, event: TrainerEvent) -> None:
        """`train()` ends, also after an error (`event.error`; then `event.metrics` is None)."""

    def on_predict(self, event: TrainerEvent) -> None:
        """The test set was scored with the best weights (after training): `event.metrics`."""

    # AllenNLP 2.10's hooks: no-ops unless overridden (then `AllenNlpHooksAdapter` calls them).

    def on_start(self, trainer: "TrainerView", is_primary: bool = True, **kwargs: Any) -> None:
        """AllenNLP's: before training, also when resuming."""
        self.trainer = trainer

    def on_backward(self, trainer: "TrainerView", batch_outputs: Any, backward_called: bool,
                    **kwargs: Any) -> bool:
        """AllenNLP's: after each training host call, with `backward_called` True (the executor ran it)."""
        return False

    def on_batch(self, trainer: "TrainerView", batch_inputs: List[Any], batch_outputs: List[Any],
                 batch_metrics: Dict[str, Any], epoch: int, batch_number: int, is_training: bool,
                 is_primary: bool = True, batch_grad_norm: Optional[float] = None, **kwargs: Any) -> None:
        """AllenNLP's: after each training host call and each validation batch."""

    def on_epoch(self, trainer: "TrainerView", metrics: Dict[str, Any], epoch: int,
                 is_primary: bool = True, **kwargs: Any) -> None:
        """AllenNLP's: after each epoch."""

    def on_end(self, trainer: "TrainerView", metrics: Optional[Dict[str, Any]] = None,
               epoch: Optional[int] = None, is_primary: bool = True, **kwargs: Any) -> None:
        """AllenNLP's: when training ends, also after an error (`metrics` None)."""

    def state_dict(self) -> Dict[str, Any]:
        """State to checkpoint (plain values)."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


def overrides(cls: type, name: str) -> bool:
    """Whether `cls` overrides `TrainerCallback`'s method `name`."""
    return getattr(cls, name) is not getattr(TrainerCallback, name)
