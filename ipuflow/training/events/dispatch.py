"""The one place through which the trainer fires its events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from ipuflow.training.events.event import EVENTS, TrainerEvent

if TYPE_CHECKING:
    from ipuflow.training.callbacks.callback import TrainerCallback
    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer


class EventDispatch:
    """Calls each callback's method for an event, in list order, with one `TrainerEvent`.

    Only callbacks that override an event's method are called for it, and an event nobody listens
    to builds no event object, so the per-host-call events cost nothing when unused.
    """

    def __init__(self, trainer: "GradientDescentTrainer", callbacks: List["TrainerCallback"]) -> None:
        self._trainer = trainer
        self.callbacks: List["TrainerCallback"] = []
        self._listeners: Dict[str, List[Any]] = {name: [] for name in EVENTS}
        for callback in callbacks:
            self.add(callback)

    def add(self, callback: "TrainerCallback") -> None:
        """Append a callback: it hears every later event."""
        # Imported here: the callback module imports the event module, which this package provides.
        from ipuflow.training.callbacks.callback import TrainerCallback

        callback.trainer = self._trainer
        self.callbacks.append(callback)
        for name in EVENTS:
            if getattr(type(callback), name) is not getattr(TrainerCallback, name):
                self._listeners[name].append(getattr(callback, name))

    def fire(self, name: str, **payload: Any) -> None:
        """Call every listener of event `name` with one event object built from `payload`."""
        listeners = self._listeners[name]
        if not listeners:
            return
        trainer = self._trainer
        event = TrainerEvent(name, trainer, trainer.state, trainer.control, **payload)
        for listener in listeners:
            listener(event)
