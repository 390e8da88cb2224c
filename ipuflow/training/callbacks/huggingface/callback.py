"""Runs a Hugging Face `transformers.TrainerCallback` unchanged inside ipuflow's trainer."""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Optional, Tuple

from ipuflow.config import ConfigurationError
from ipuflow.config.requirements import PackageRequirement, TRANSFORMERS
from ipuflow.config.import_policy import check_module_may_be_imported
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.callbacks.huggingface.state_mirror import (
    HuggingFaceStateMirror, hugging_face_logs, hugging_face_metrics,
)
from ipuflow.training.callbacks.huggingface.training_arguments import (
    arguments_of_run, build_training_arguments, check_training_argument_names,
)
from ipuflow.training.events import TrainerEvent
from ipuflow.training.events.optimizer_steps import OPTIMIZER_STEP_EVENTS
from ipuflow.torch_features import TRANSFORMERS_FOR_CALLBACKS, require_transformers

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView

logger = logging.getLogger(__name__)

# ipuflow's control flags under the names of transformers.TrainerControl.
_CONTROL_FLAGS = {
    "should_training_stop": "should_stop",
    "should_epoch_stop": "should_epoch_stop",
    "should_save": "should_save",
    "should_evaluate": "should_validate",
    "should_log": "should_log",
}


def hugging_face_callback_class(path: str, key_path: str = "callback") -> type:
    """The `transformers.TrainerCallback` subclass that `path` names (``"transformers.PrinterCallback"``,
    or a bare name in `transformers`), imported under the project's import policy."""
    try:
        import transformers
    except ImportError as error:
        raise ConfigurationError(
            f"the 'huggingface' callback runs transformers' callbacks, and transformers cannot be "
            f"imported ({error}). Install it with `pip install ipuflow[transformers]`.", key=key_path
        ) from None
    require_transformers(TRANSFORMERS_FOR_CALLBACKS, "the 'huggingface' callback", path=key_path)
    dotted = path if "." in path else f"transformers.{path}"
    module_name, _, class_name = dotted.rpartition(".")
    if not all(part.isidentifier() for part in dotted.split(".")):
        raise ConfigurationError(f"{path!r} is not a class path such as 'transformers.EarlyStoppingCallback'.",
                                 key=key_path)
    # A config from an archive may only import trusted packages: decided on the name, before importing.
    check_module_may_be_imported(module_name, dotted)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ConfigurationError(f"the module of {path!r} cannot be imported ({error}).", key=key_path) from None
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, transformers.TrainerCallback)):
        what = "nothing" if found is None else f"{found!r}"
        raise ConfigurationError(f"{path!r} names {what}, not a subclass of transformers.TrainerCallback.",
                                 key=key_path)
    return found


@TrainerCallback.register("huggingface")
class HuggingFaceCallback(TrainerCallback):
    """Runs a Hugging Face `TrainerCallback` on ipuflow's events, with Trainer-shaped arguments.

    Each ipuflow event calls the method of the same name with `args` (a `transformers.TrainingArguments`
    describing this run), `state` (a `transformers.TrainerState` mirrored from ipuflow's),
    `control` (a `transformers.TrainerControl` holding ipuflow's requests) and the Trainer's keyword
    arguments (`model`, `processing_class`, `optimizer`, `lr_scheduler`, `train_dataloader`,
    `eval_dataloader`, and `metrics` or `logs` where the event has them). The flags the callback
    sets are ipuflow's requests: `should_training_stop` stops training, `should_epoch_stop` ends
    the epoch, `should_save` checkpoints, `should_evaluate` validates, `should_log` logs.

    callback: the class, e.g. "transformers.EarlyStoppingCallback" or "my_package.MyCallback"
        (a bare name is looked up in `transformers`).
    args: keyword arguments for its constructor, e.g. {"early_stopping_patience": 2}.
    training_args: TrainingArguments fields to set beyond what ipuflow derives from the config,
        e.g. {"metric_for_best_model": "accuracy"}.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (TRANSFORMERS,)

    def __init__(self, serialization_dir: str, callback: str, args: Optional[Dict[str, Any]] = None,
                 training_args: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(serialization_dir)
        callback_class = hugging_face_callback_class(callback)
        try:
            self.callback = callback_class(**(args or {}))
        except TypeError as error:
            # Keyed, not prefixed: the resolver then names the whole path (trainer.callbacks.1.args).
            raise ConfigurationError(f"{callback} cannot be built with {args or {}} ({error}).", key="args") from None
        self._training_args_overrides = dict(training_args or {})
        check_training_argument_names(self._training_args_overrides)
        self._args: Any = None
        self._mirror = HuggingFaceStateMirror()
        from transformers import TrainerControl as HuggingFaceTrainerControl

        self._control = HuggingFaceTrainerControl()

    def listeners(self) -> List[Tuple[str, Callable[[TrainerEvent], None]]]:
        """Every event, except the optimizer-step ones that the wrapped callback does not override (so
        that the step pays for them, and poptorch refuses them, only where they do something)."""
        import transformers

        def wrapped_overrides(name: str) -> bool:
            method = getattr(type(self.callback), name, None)
            return method is not None and method is not getattr(transformers.TrainerCallback, name, None)

        return [(name, listener) for name, listener in super().listeners()
                if name not in OPTIMIZER_STEP_EVENTS or wrapped_overrides(name)]

    # -- the Trainer's arguments -----------------------------------------------------------

    def training_arguments(self, trainer: "TrainerView") -> Any:
        """The `TrainingArguments` the callback sees (built once, from the trainer's configuration)."""
        if self._args is None:
            self._args = build_training_arguments(arguments_of_run(trainer), self._training_args_overrides,
                                                  trainer.executor.device)
            self._mirror.state.save_steps = self._args.save_steps
        return self._args

    def _call(self, name: str, event: TrainerEvent, **extra: Any) -> None:
        trainer = event.trainer
        args = self.training_arguments(trainer)
        state = self._mirror.refresh(event.state)
        control = self._control
        for flag, own in _CONTROL_FLAGS.items():
            setattr(control, flag, getattr(event.control, own))
        try:
            returned = getattr(self.callback, name)(
                args, state, control,
                model=trainer.model, processing_class=None, optimizer=trainer.optimizer,
                lr_scheduler=trainer.learning_rate_scheduler, train_dataloader=trainer.data_loader,
                eval_dataloader=trainer.validation_data_loader, **extra,
            )
        except AssertionError as refused:
            # Hugging Face callbacks check the TrainingArguments they need with assert statements.
            raise ConfigurationError(
                f"{type(self.callback).__name__} ({name}) refused this run's TrainingArguments: {refused}. "
                "ipuflow derives them from the config (validation data gives eval_strategy; a single "
                "trainer.validation_metric gives metric_for_best_model); set others with the callback's "
                "training_args."
            ) from None
        if returned is not None:  # a callback may return the control it changed
            control = self._control = returned
        for flag, own in _CONTROL_FLAGS.items():
            setattr(event.control, own, bool(getattr(control, flag)))

    # -- ipuflow's events, each calling the Hugging Face method of the same name ----------------

    def on_init_end(self, event: TrainerEvent) -> None:
        self._call("on_init_end", event)

    def on_train_begin(self, event: TrainerEvent) -> None:
        self._call("on_train_begin", event)

    def on_epoch_begin(self, event: TrainerEvent) -> None:
        self._call("on_epoch_begin", event)

    def on_step_begin(self, event: TrainerEvent) -> None:
        self._call("on_step_begin", event)

    def on_substep_end(self, event: TrainerEvent) -> None:
        self._call("on_substep_end", event)

    def on_pre_optimizer_step(self, event: TrainerEvent) -> None:
        self._call("on_pre_optimizer_step", event)

    def on_optimizer_step(self, event: TrainerEvent) -> None:
        self._call("on_optimizer_step", event)

    def on_step_end(self, event: TrainerEvent) -> None:
        self._call("on_step_end", event)

    def on_log(self, event: TrainerEvent) -> None:
        logs = hugging_face_logs(event.logs or {})
        logs["epoch"] = event.state.epoch
        self._call("on_log", event, logs=logs)

    def on_prediction_step(self, event: TrainerEvent) -> None:
        self._call("on_prediction_step", event)

    def on_evaluate(self, event: TrainerEvent) -> None:
        metrics = hugging_face_metrics(event.metrics or {}, "eval")
        metrics["epoch"] = event.state.epoch
        # The Trainer logs an evaluation's metrics (`on_log`) before `on_evaluate`.
        self._call("on_log", event, logs=dict(metrics))
        self._call("on_evaluate", event, metrics=metrics)
        self._mirror.record_evaluation(metrics, self.training_arguments(event.trainer))

    def on_save(self, event: TrainerEvent) -> None:
        self._call("on_save", event)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        self._call("on_epoch_end", event)

    def on_train_end(self, event: TrainerEvent) -> None:
        self._call("on_train_end", event)

    def on_predict(self, event: TrainerEvent) -> None:
        self._call("on_predict", event, metrics=hugging_face_metrics(event.metrics or {}, "test"))

    # -- checkpointed state ----------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """The mirrored best metric and, for a callback with Hugging Face's `ExportableState`, its `state()`."""
        from transformers import trainer_callback

        state: Dict[str, Any] = {"trainer_state": self._mirror.state_dict()}
        exportable = getattr(trainer_callback, "ExportableState", None)  # transformers 4.41 and newer
        if exportable is not None and isinstance(self.callback, exportable):
            state["callback"] = self.callback.state()
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned (the callback's attributes, as `ExportableState.from_state`)."""
        self._mirror.load_state_dict(state_dict.get("trainer_state", {}))
        for name, value in state_dict.get("callback", {}).get("attributes", {}).items():
            setattr(self.callback, name, value)
