"""The steps that build a `GradientDescentTrainer`'s parts from its config section, which its
`from_partial_objects` takes in dependency order (docs/training.md): freezing and the optimizer, the
trainer's aliases of executor options, the executor, the schedulers, the parts built in the
serialization directory, and the checks of the trainer's own arguments."""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ipuflow.config import ConfigurationError, Lazy, validators
from ipuflow.data.loader import DataLoader
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.training.callbacks.batch_callback import BatchCallback
from ipuflow.training.callbacks.batch_callback import BatchCallbackAdapter
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.callbacks.console_metrics import ConsoleMetricsCallback
from ipuflow.training.callbacks.epoch_callback import EpochCallback, EpochCallbackAdapter
from ipuflow.training.callbacks.progress import ProgressCallback
from ipuflow.training.callbacks.tensorboard import TensorBoardCallback
from ipuflow.training.optim.moving_average import MovingAverage
from ipuflow.training.optim.optimizers import Optimizer
from ipuflow.training.optim.regularization import add_regularization_penalty
from ipuflow.training.optim.scheduler import Scheduler
from ipuflow.training.loop.validation import ValidationLoaders, named_sets

logger = logging.getLogger(__name__)

DEFAULT_CALLBACKS = (ProgressCallback, ConsoleMetricsCallback, TensorBoardCallback)
"""Added to every trainer with `enable_default_callbacks` (each unless one of its type is listed)."""


ALLENNLP_TRAINER_KEYS: Dict[str, str] = {
    "cuda_device": 'is AllenNLP\'s; ipuflow sets the device on the executor: "trainer.executor.device": "cpu" '
                   'for -1, "cuda" for a GPU ("auto", the default, takes CUDA when there is one; under torchrun '
                   'each rank takes its LOCAL_RANK\'s GPU).',
    "opt_level": 'is Apex\'s mixed precision (AllenNLP 1.x); ipuflow\'s is "trainer.executor.precision": "fp16" '
                 '(O1/O2, with trainer.executor.loss_scaling or auto_loss_scaling), "bf16", or "fp32" (O0).',
    "use_amp": 'is AllenNLP\'s; ipuflow\'s is "trainer.executor.precision": "fp16" (or "bf16"), with '
               'trainer.executor.auto_loss_scaling for a dynamic loss scale.',
}
"""AllenNLP trainer keys, each refused with the ipuflow setting that replaces it (the trainer's `replaced_keys`)."""


def loader_length(loader: Any) -> Optional[int]:
    """`len(loader)` (host calls per epoch), or None for no loader or one without a length."""
    try:
        return len(loader) if loader is not None else None
    except TypeError:
        return None


def all_callbacks(callbacks: Optional[List[TrainerCallback]], batch_callbacks: Optional[List[BatchCallback]],
                  epoch_callbacks: Optional[List[EpochCallback]], enable_default_callbacks: bool,
                  serialization_dir: str) -> List[TrainerCallback]:
    """The trainer's callbacks in dispatch order: the configured ones, the defaults, then adapters for
    the one-method batch and epoch callbacks."""
    found = list(callbacks or [])
    if enable_default_callbacks:
        found += [default(serialization_dir=serialization_dir) for default in DEFAULT_CALLBACKS
                  if not any(type(callback) is default for callback in found)]
    found += [BatchCallbackAdapter(callback, serialization_dir) for callback in batch_callbacks or []]
    return found + [EpochCallbackAdapter(callback, serialization_dir) for callback in epoch_callbacks or []]


def check_trainer_arguments(executor: StepExecutor, patience: Optional[int], validation_data_loader: Optional[ValidationLoaders],
                            grad_clipping: Optional[float], num_epochs: int, log_interval: int,
                            validation_interval: Optional[int], max_steps: Optional[int]) -> None:
    """Refuse arguments the trainer cannot honour (keys relative to the trainer's section)."""
    if patience is not None and validation_data_loader is None:
        logger.warning("trainer.patience is set but there is no validation data: early stopping is off")
    validators.positive_int("num_epochs", num_epochs)
    validators.positive_int("log_interval", log_interval)
    validators.positive_int("validation_interval", validation_interval, optional=True)
    validators.positive_int("max_steps", max_steps, optional=True)
    if grad_clipping is not None and getattr(executor.options, "max_grad_value", None) != grad_clipping:
        # Value clipping happens in the executor, on the reduced and unscaled gradient.
        raise ConfigurationError(
            f"It is the executor's max_grad_value, and the executor given has max_grad_value "
            f"{executor.options.max_grad_value}; build the executor with max_grad_value={grad_clipping}.",
            key="grad_clipping",
        )


def freeze(model: Model, no_grad: Optional[List[str]]) -> None:
    """Freeze the parameters whose names match a `no_grad` regex (`re.search`); log every frozen one."""
    if no_grad:
        patterns = [re.compile(pattern) for pattern in no_grad]
        for name, parameter in model.named_parameters():
            if any(pattern.search(name) for pattern in patterns):
                parameter.requires_grad_(False)
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    if frozen:
        logger.info("Frozen parameters: %s", ", ".join(frozen))


def executor_aliases(executor_config: Dict[str, Any], grad_norm: Union[float, bool], grad_clipping: Optional[float],
                     num_gradient_accumulation_steps: Optional[int]) -> Dict[str, Any]:
    """The executor options the trainer's own spellings give (`grad_norm` → `max_grad_norm`,
    `grad_clipping` → `max_grad_value`, `num_gradient_accumulation_steps` → `gradient_accumulation`);
    both spellings with different values is an error."""
    options: Dict[str, Any] = {}

    def alias(trainer_key: str, value: Any, executor_key: str) -> None:
        configured = executor_config.get(executor_key)
        if configured is not None and configured != value:
            raise ConfigurationError(
                f"{value!r} is the same setting as executor.{executor_key}, which is {configured!r}; give one of them.",
                key=trainer_key,
            )
        options[executor_key] = value

    # Checked here, so that a bad value is named by the spelling the config used.
    if num_gradient_accumulation_steps is not None:
        validators.positive_int("num_gradient_accumulation_steps", num_gradient_accumulation_steps)
        alias("num_gradient_accumulation_steps", num_gradient_accumulation_steps, "gradient_accumulation")
    if grad_norm is True:
        raise ConfigurationError(
            "true (report the norm without clipping) is not supported: the executor computes the gradients on "
            "the device; give a float to clip the global norm to it.",
            key="grad_norm",
        )
    if grad_norm is not False:
        alias("grad_norm", validators.positive_number("grad_norm", grad_norm), "max_grad_norm")
    if grad_clipping is not None:
        alias("grad_clipping", validators.positive_number("grad_clipping", grad_clipping), "max_grad_value")
    return options


def build_scheduler(scheduler: Optional[Lazy[Any]], optimizer: Any, num_epochs: int,
                    num_steps_per_epoch: Optional[int], validation_metric: Union[str, List[str]],
                    max_steps: Optional[int] = None) -> Optional[Scheduler]:
    """A learning-rate or momentum scheduler with what it is injected (None if not configured); a
    step-based schedule spans `max_steps` when it is set and reached before `num_epochs` end."""
    if scheduler is None:
        return None
    return scheduler.construct(optimizer=optimizer, num_epochs=num_epochs, num_steps_per_epoch=num_steps_per_epoch,
                               validation_metric=validation_metric, max_steps=max_steps)


def build_optimization(model: Model, optimizer: Lazy[Optimizer], moving_average: Optional[Lazy[MovingAverage]],
                       no_grad: Optional[List[str]]) -> Tuple[Optimizer, Optional[MovingAverage]]:
    """`no_grad` freezing, then the optimizer over the trainable parameters, then the moving average."""
    freeze(model, no_grad)
    add_regularization_penalty(model)  # before the executor wraps or compiles the model
    parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    built_optimizer = optimizer.construct(model_parameters=parameters)
    # parameter_groups may freeze more parameters; the moving average tracks the trainable ones.
    parameters = [(name, p) for name, p in parameters if p.requires_grad]
    return built_optimizer, moving_average.construct(parameters=parameters) if moving_average is not None else None


def choose_update_implementation(built_optimizer: Optimizer) -> None:
    """Choose the optimizer's implementation of the update (fused, foreach, single-tensor) for where
    the executor has placed the parameters, and log it: the optimizer was built before, on the host."""
    try:
        implementation = built_optimizer.choose_implementation()
    except ConfigurationError as error:
        raise error.locate("trainer.optimizer.") from None
    logger.info("Optimizer update: %s", implementation.describe())


def build_executor(executor: Lazy[StepExecutor], model: Model, built_optimizer: Optimizer, data_loader: DataLoader,
                   validation_data_loader: Optional[ValidationLoaders], executor_options: Dict[str, Any]) -> Tuple[StepExecutor, Optional[int]]:
    """The training executor, the loaders sized for it, and the optimizer updates per epoch (None if the
    loader has no length)."""
    built_executor = executor.construct(model=model, optimizer=built_optimizer, training=True, **executor_options)
    choose_update_implementation(built_optimizer)
    # Only the batch-size factor now (len(data_loader) sizes the schedules); compiling waits for
    # train(), so that --dry-run, a finished run's -r and a failed restore compile nothing.
    built_executor.prepare(data_loader, compile=False)
    for loader in named_sets(validation_data_loader).values():  # every validation set
        built_executor.inference_executor().prepare(loader, compile=False)
    calls = loader_length(data_loader)
    return built_executor, None if calls is None else calls * built_executor.updates_per_call


def build_in_directory(lazies: Optional[Sequence[Optional[Lazy[Any]]]], serialization_dir: str) -> List[Any]:
    """The configured parts (None entries skipped) built with the serialization directory injected:
    the callbacks."""
    return [lazy.construct(serialization_dir=serialization_dir) for lazy in lazies or [] if lazy is not None]
