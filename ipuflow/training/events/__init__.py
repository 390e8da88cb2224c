"""The trainer's events: the control object callbacks steer with, the event object every callback
method receives, the `TrainerView` of the trainer that callbacks read, and the dispatch that fires them."""

from ipuflow.training.events.control import TrainerControl
from ipuflow.training.events.dispatch import CallbackList, EventDispatch
from ipuflow.training.events.event import EVENTS, TEST, TRAIN, VALIDATION, TrainerEvent
from ipuflow.training.events.view import Listener, TrainerView

__all__ = ["EVENTS", "CallbackList", "EventDispatch", "TEST", "TRAIN", "TrainerControl", "TrainerEvent", "TrainerView",
           "Listener", "VALIDATION"]
