"""The `args` a Hugging Face callback receives: a real `transformers.TrainingArguments` describing the
ipuflow run, built without its device set-up.

`TrainingArguments(...)` itself needs `accelerate` and, in `__post_init__`, sets up devices through
accelerate's process state (choosing and setting the CUDA device, joining a torch.distributed group
under a launcher): ipuflow's executor owns the device, so that must not happen behind its back.
The instance is therefore filled field by field (every field at the installed transformers'
default, then ipuflow's values, then the user's `training_args`), the strategies are converted to
their enums as `__post_init__` would, and the device properties answer from ipuflow's executor.
`isinstance(args, TrainingArguments)`, `args.to_dict()` and every field a callback reads work.
"""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, Mapping

import torch

from ipuflow.config import ConfigurationError
from ipuflow.config.errors import did_you_mean

if TYPE_CHECKING:
    from ipuflow.training.events.view import TrainerView

# Fields whose values transformers converts from strings to enums in `__post_init__`.
_INTERVAL_FIELDS = ("eval_strategy", "evaluation_strategy", "logging_strategy")


def _enum_values(values: Dict[str, Any]) -> None:
    from transformers import trainer_utils

    # transformers < 4.46 used IntervalStrategy for saving too.
    save_strategy: Any = getattr(trainer_utils, "SaveStrategy", trainer_utils.IntervalStrategy)
    for name in _INTERVAL_FIELDS:
        if isinstance(values.get(name), str):
            values[name] = trainer_utils.IntervalStrategy(values[name])
    if isinstance(values.get("save_strategy"), str):
        values["save_strategy"] = save_strategy(values["save_strategy"])
    if isinstance(values.get("report_to"), str):
        values["report_to"] = [] if values["report_to"] == "none" else [values["report_to"]]


def check_training_argument_names(names: Mapping[str, Any], key_path: str = "training_args") -> None:
    """Refuse a name that is not a field of the installed `transformers.TrainingArguments`."""
    from transformers import TrainingArguments

    fields = [field.name for field in dataclasses.fields(TrainingArguments)]
    for name in names:
        if name not in fields:
            raise ConfigurationError(
                f"not a field of transformers.TrainingArguments "
                f"(transformers {_transformers_version()}).{did_you_mean(name, fields)}", key=f"{key_path}.{name}"
            )


def build_training_arguments(run_values: Mapping[str, Any], overrides: Mapping[str, Any], device: torch.device,
                             key_path: str = "training_args") -> Any:
    """A `TrainingArguments` with `run_values` (what ipuflow's config says), then `overrides` (the
    user's, checked against the fields; `key_path` names them in errors), answering `device`,
    `n_gpu`, `world_size` and `process_index` for ipuflow's executor and process group."""
    from transformers import TrainingArguments

    check_training_argument_names(overrides, key_path)
    fields = {field.name: field for field in dataclasses.fields(TrainingArguments)}
    values: Dict[str, Any] = {}
    for name, field in fields.items():
        if field.default is not dataclasses.MISSING:
            values[name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            values[name] = field.default_factory()
        else:
            values[name] = None
    if "evaluation_strategy" in fields and "eval_strategy" not in fields and "eval_strategy" in run_values:
        run_values = {**run_values, "evaluation_strategy": run_values["eval_strategy"]}
    values.update({name: value for name, value in run_values.items() if name in fields})
    values.update(overrides)
    if values.get("greater_is_better") is None and values.get("metric_for_best_model") is not None:
        # As __post_init__: a loss is lower-is-better, anything else higher-is-better.
        values["greater_is_better"] = not str(values["metric_for_best_model"]).endswith("loss")
    _enum_values(values)

    args = TrainingArguments.__new__(TrainingArguments)
    for name, value in values.items():
        object.__setattr__(args, name, value)
    # `device` and friends read these (normally set by `_setup_devices`).
    args.__dict__["_setup_devices"] = device
    object.__setattr__(args, "_n_gpu", 1 if device.type == "cuda" else 0)
    object.__setattr__(args, "distributed_state", _process_group_state())
    return args


def _process_group_state() -> Any:
    """What `world_size`/`process_index` read: None in a single process (they answer 1 and 0)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    rank = dist.get_rank()
    return SimpleNamespace(num_processes=dist.get_world_size(), process_index=rank,
                           local_process_index=int(os.environ.get("LOCAL_RANK", rank)), distributed_type="MULTI_GPU")


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def arguments_of_run(trainer: "TrainerView") -> Dict[str, Any]:
    """The `TrainingArguments` values that describe `trainer`'s run:
    epochs, limits, batch sizes, learning rate, intervals and strategies, the best-model metric."""
    state = trainer.state
    options = getattr(trainer.executor, "options", None)
    values: Dict[str, Any] = {
        "output_dir": str(trainer.serialization_dir),
        "num_train_epochs": state.num_train_epochs,
        "max_steps": trainer.max_steps if trainer.max_steps is not None else -1,
        "logging_strategy": "steps",
        "logging_steps": state.logging_steps or 500,
        "report_to": "none",
        "disable_tqdm": True,
    }
    batch_size = getattr(trainer.data_loader, "batch_size", None)
    if batch_size is not None:
        values["per_device_train_batch_size"] = batch_size
    validation_batch_size = getattr(trainer.validation_data_loader, "batch_size", None)
    if validation_batch_size is not None:
        values["per_device_eval_batch_size"] = validation_batch_size
    if options is not None:
        values["gradient_accumulation_steps"] = options.gradient_accumulation
        values["max_grad_norm"] = options.max_grad_norm if options.max_grad_norm is not None else 0.0
        values["bf16"] = options.precision == "bf16"
        values["fp16"] = options.precision == "fp16"
    if trainer.optimizer is not None:
        defaults = trainer.optimizer.defaults
        values["learning_rate"] = defaults.get("lr", values.get("learning_rate"))
        for name, key in (("weight_decay", "weight_decay"), ("adam_epsilon", "eps")):
            if isinstance(defaults.get(key), float):
                values[name] = defaults[key]
        if isinstance(defaults.get("betas"), (tuple, list)):
            values["adam_beta1"], values["adam_beta2"] = (float(beta) for beta in defaults["betas"])
    if trainer.validation_data_loader is not None:
        values["eval_strategy"] = "steps" if state.eval_steps else "epoch"
        values["eval_steps"] = state.eval_steps
        # ipuflow always ends training with the best weights loaded.
        values["load_best_model_at_end"] = True
        tracked = trainer.metric_tracker.tracked_metrics
        if len(tracked) == 1:  # a list of metrics (summed) has no single Hugging Face name
            sign, name = tracked[0]
            values["metric_for_best_model"] = name
            values["greater_is_better"] = sign > 0
    else:
        values["eval_strategy"] = "no"
    checkpointer = trainer.checkpointer
    if checkpointer is None:
        values["save_strategy"] = "no"
    elif checkpointer.save_every_num_batches:
        values["save_strategy"] = "steps"
        values["save_steps"] = checkpointer.save_every_num_batches * trainer.executor.updates_per_call
    else:
        values["save_strategy"] = "epoch" if checkpointer.save_completed_epochs else "no"
    return values
