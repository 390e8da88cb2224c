"""The one place through which the trainer fires its events."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type, Union

from ipuflow.config import ConfigurationError
from ipuflow.training.events.event import EVENTS, TrainerEvent
from ipuflow.training.events.optimizer_steps import OPTIMIZER_STEP_EVENTS, OptimizerStepEvents
from ipuflow.training.events.view import Listener, TrainerView


class EventDispatch:
    """Calls each callback's method for an event, in list order, with one `TrainerEvent`.

    Only callbacks that override an event's method are called for it, and an event nobody listens
    to builds no event object, so the per-host-call events cost nothing when unused.
    """

    def __init__(self, trainer: TrainerView, callbacks: Sequence[Listener]) -> None:
        self._trainer = trainer
        self.callbacks: List[Listener] = []
        self._listeners: Dict[str, List[Any]] = {name: [] for name in EVENTS}
        self._step_events = OptimizerStepEvents(trainer, self.fire)
        for callback in callbacks:
            self.add(callback)

    def add(self, callback: Listener) -> None:
        """Append a callback: it hears every later event it lists in `listeners()`."""
        callback.trainer = self._trainer
        self.callbacks.append(callback)
        for name, listener in callback.listeners():
            self._listeners[name].append(listener)
        self.connect_step_events()  # a callback added after construction may listen to them

    def remove(self, callback: Listener) -> None:
        """Take `callback` (and its AllenNLP hooks' listeners) off the dispatch."""
        self.callbacks.remove(callback)
        for name, listeners in self._listeners.items():
            self._listeners[name] = [listener for listener in listeners
                                     if getattr(listener, "__self__", None) is not callback
                                     and getattr(getattr(listener, "__self__", None), "callback", None) is not callback]

    def connect_step_events(self) -> None:
        """Give the trainer's executor the optimizer-step hooks if a callback listens to their events
        (decided here, when the callbacks change, so that the step pays nothing without them); an
        executor that cannot fire them refuses."""
        executor = getattr(self._trainer, "executor", None)
        if executor is None:  # the trainer is still being built: it connects once it has its executor
            return
        listeners = [listener for name in OPTIMIZER_STEP_EVENTS for listener in self._listeners[name]]
        try:
            executor.set_step_hooks(self._step_events if listeners else None)
        except ConfigurationError as refused:
            names = sorted({type(getattr(listener, "__self__", listener)).__name__ for listener in listeners})
            raise ConfigurationError(f"{refused.reason} They are overridden by: {', '.join(names)}.",
                                     key=refused.key) from None

    def fire(self, name: str, **payload: Any) -> None:
        """Call every listener of event `name` with one event object built from `payload`."""
        listeners = self._listeners[name]
        if not listeners:
            return
        trainer = self._trainer
        event = TrainerEvent(name, trainer, trainer.state, trainer.control, **payload)
        for listener in listeners:
            listener(event)


class CallbackList:
    """The trainer's callback list (Hugging Face's `add_callback`, `pop_callback`, `remove_callback`),
    kept by its `EventDispatch` in `_events`."""

    _events: EventDispatch

    @property
    def callbacks(self) -> List[Listener]:
        """Every callback on the dispatch: the configured ones, the defaults, then the adapters of
        `batch_callbacks` and `epoch_callbacks`."""
        return self._events.callbacks

    def add_callback(self, callback: Listener) -> None:
        """Add a callback after construction (it hears every later event)."""
        self._events.add(callback)

    def pop_callback(self, callback: Union[Listener, Type[Listener]]) -> Optional[Listener]:
        """Remove and return `callback`, or the first callback of that class (None if there is none)."""
        found = next((candidate for candidate in self._events.callbacks
                      if candidate is callback or (isinstance(callback, type) and isinstance(candidate, callback))), None)
        if found is not None:
            self._events.remove(found)
        return found

    def remove_callback(self, callback: Union[Listener, Type[Listener]]) -> None:
        """Remove `callback`, or the first callback of that class (nothing if there is none)."""
        self.pop_callback(callback)
