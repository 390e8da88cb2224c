"""`ipuflow train --dry-run`: build everything, try one training step, report the plan; train nothing.

The dry run checks what a real run would otherwise find out late: the serialization directory can
be created, the model's `forward` takes the batches the data loader makes and returns a loss that
backpropagates, and `validation_metric` names a metric the model reports. A poptorch config is
checked without the Poplar SDK: its keys and options are validated and its plan is computed, and the
report says that compiling needs the SDK.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.component_names import registered_name_of
from ipuflow.data.loader import DataLoader
from ipuflow.training.callbacks.batch_callback import BatchCallbackAdapter
from ipuflow.training.callbacks.epoch_callback import EpochCallbackAdapter

logger = logging.getLogger(__name__)

_SDK_NOTE = ("poptorch could not be imported here: the config's keys, options and plan were checked and one training "
             "step ran on the CPU, but compiling for IPUs needs Graphcore's Poplar SDK (which provides poptorch).")


def dry_run(params: Params, serialization_dir: Path, file_friendly_logging: bool = False) -> Dict[str, Any]:
    """Check `params` by building every object in a scratch directory and running one training step
    (forward and backward, no update) on the built model; return the plan as a JSON-ready dict."""
    from ipuflow.experiment.run import _build
    from ipuflow.experiment.serialization_dir import configure_logging, refuse_unusable_directory
    from ipuflow.execution.poptorch import PoptorchUnavailable

    refuse_unusable_directory(serialization_dir)
    configure_logging(None, file_friendly_logging)
    sdk_note: Optional[str] = None
    with tempfile.TemporaryDirectory(prefix="ipuflow-dry-run-") as scratch:
        try:
            experiment = _build(params, Path(scratch))
        except PoptorchUnavailable:
            # Everything up to importing poptorch has been checked (keys, types, options, placements);
            # the plan follows from the shared options, which the native executor computes alike.
            logger.info("poptorch is not available: computing the plan with the native executor on the CPU")
            experiment = _build(_with_native_stand_in(params), Path(scratch))
            _pad_as_poptorch(experiment.trainer)
            sdk_note = _SDK_NOTE
        report = experiment.describe()
        if registered_name_of(experiment.trainer.executor) == "poptorch" or sdk_note is not None:
            report["executor"]["ipu"] = _ipu_plan(params, experiment.model)
        report.update(training_plan(experiment.trainer, experiment.datasets))
        report["trial_step"] = trial_step(experiment.trainer)
    if sdk_note is not None:
        report["executor"]["backend"] = "poptorch"
        report["executor"].pop("device", None)
        report["executor"]["compiled"] = False
        report["executor"]["note"] = sdk_note
    return report


@contextlib.contextmanager
def _poptorch_block(params: Params) -> Iterator[Dict[str, Any]]:
    """The executor block of `params` with its `ipu_config` file's keys filled in where the block and
    the trainer's spellings leave them out, as for the poptorch executor itself; an error about a key
    the file set, raised inside, says so."""
    from ipuflow.execution.optimum_ipu_config import ipu_config_applied

    trainer = params.as_dict()["trainer"]
    spellings = {"num_gradient_accumulation_steps": "gradient_accumulation", "grad_norm": "max_grad_norm",
                 "grad_clipping": "max_grad_value"}
    given = {key: trainer[name] for name, key in spellings.items() if trainer.get(name) not in (None, False)}
    with ipu_config_applied(Params(trainer["executor"], history="trainer.executor."), given) as merged:
        yield merged.as_dict()


def _with_native_stand_in(params: Params) -> Params:
    """`params` with the poptorch executor replaced by a native CPU one with the same batching options,
    those of its `ipu_config` file included."""
    from ipuflow.config.from_params import config_parameters
    from ipuflow.execution.executor import StepExecutor

    shared = set(config_parameters(StepExecutor, StepExecutor.__init__)) - {
        "model", "optimizer", "training", "precision", "loss_scaling", "auto_loss_scaling"}
    config = params.as_dict()
    with _poptorch_block(params) as executor:
        config["trainer"]["executor"] = {"type": "native", "device": "cpu",
                                         **{key: value for key, value in executor.items() if key in shared}}
    return Params(config)


def _ipu_plan(params: Params, model: torch.nn.Module) -> Dict[str, Any]:
    """The poptorch executor's IPU settings and the model's placement on IPUs, as the executor sets them."""
    from ipuflow.execution.ipu_plan import ipu_plan

    with _poptorch_block(params) as executor:
        try:
            return ipu_plan(model, executor)
        except ConfigurationError as error:
            raise error.locate("trainer.executor.") from None


def _pad_as_poptorch(trainer: Any) -> None:
    """Give the loaders the padding the poptorch executor needs, which its native stand-in does not."""
    from ipuflow.execution.executor import compiled_shapes_reason

    for loader in (trainer.data_loader, *trainer.validation_data_loaders.values()):
        loader.set_fixed_shapes(compiled_shapes_reason("poptorch"))


def training_plan(trainer: Any, datasets: Mapping[str, List[Any]]) -> Dict[str, Any]:
    """What one run will do: updates in total, the optimizer, the lr schedule, callbacks, dropped samples."""
    loader = trainer.data_loader
    calls = len(loader)
    if calls == 0:
        raise ConfigurationError(
            f"the {len(datasets['train'])} training instances fill no combined batch of "
            f"{loader.combined_batch_size} rows, so an epoch would train nothing. Lower data_loader.batch_size or "
            "the executor's device_iterations/gradient_accumulation/replication_factor, or set "
            "data_loader.pad_on_batch_axis: true.",
            path="data_loader",
        )
    updates_per_epoch = calls * trainer.executor.updates_per_call
    total = updates_per_epoch * trainer.num_epochs
    if trainer.max_steps is not None:
        total = min(total, trainer.max_steps)
    plan: Dict[str, Any] = {
        "num_epochs": trainer.num_epochs,
        "max_steps": trainer.max_steps,
        "total_optimizer_updates": total,
        "training_samples_dropped_per_epoch": len(datasets["train"]) - min(calls * loader.combined_batch_size,
                                                                            len(datasets["train"])),
        "optimizer": _optimizer_summary(trainer.optimizer),
        "learning_rate_schedule": _schedule_summary(trainer.learning_rate_scheduler, trainer.optimizer, total),
        "validation_metric": _validation_metric(trainer),
        "callbacks": [_registered_name(callback) for callback in trainer.callbacks
                      if not isinstance(callback, (BatchCallbackAdapter, EpochCallbackAdapter))],
    }
    batch_callbacks = [c.callback for c in trainer.callbacks if isinstance(c, BatchCallbackAdapter)]
    epoch_callbacks = [c.callback for c in trainer.callbacks if isinstance(c, EpochCallbackAdapter)]
    if batch_callbacks:
        plan["batch_callbacks"] = [_registered_name(callback) for callback in batch_callbacks]
    if epoch_callbacks:
        plan["epoch_callbacks"] = [_registered_name(callback) for callback in epoch_callbacks]
    return plan


def _registered_name(component: Any) -> str:
    """The name a component is registered under in its family, else its class path."""
    return registered_name_of(component) or f"{type(component).__module__}.{type(component).__qualname__}"


# torch's implementation switches, which no config sets: left out of the report.
_TORCH_SWITCHES = {"foreach", "capturable", "differentiable", "fused", "maximize", "decoupled_weight_decay"}


def _optimizer_summary(optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    summary: Dict[str, Any] = {"type": _registered_name(optimizer)}
    summary.update({key: value for key, value in optimizer.defaults.items()
                    if key not in _TORCH_SWITCHES and _is_json_scalar(value)})
    summary["parameter_groups"] = len(optimizer.param_groups)
    implementation = getattr(optimizer, "implementation", None)
    if implementation is not None:  # fused, foreach or single-tensor, for where the executor put the parameters
        summary["implementation"] = implementation.name
    return summary


def _is_json_scalar(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_json_scalar(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _schedule_summary(scheduler: Any, optimizer: torch.optim.Optimizer, total_updates: int) -> Optional[Dict[str, Any]]:
    """The scheduler's name and the first group's lr at a few updates (the optimizer is restored)."""
    if scheduler is None:
        return None
    summary: Dict[str, Any] = {"type": _registered_name(scheduler)}
    saved_groups = [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]
    saved_state = copy.deepcopy(scheduler.state_dict())
    points = sorted({1, max(1, total_updates // 4), max(1, total_updates // 2), max(1, 3 * total_updates // 4),
                     total_updates})
    values: Dict[str, float] = {}
    try:
        for update in points:
            scheduler.step_batch(update)
            values[str(update)] = float(optimizer.param_groups[0]["lr"])
    finally:
        scheduler.load_state_dict(saved_state)
        for group, saved in zip(optimizer.param_groups, saved_groups):
            group.update(saved)
    if len(set(values.values())) > 1 or getattr(scheduler, "last_update", None) is not None:
        summary["lr_at_update"] = values
    else:  # an epoch-based schedule: its value changes at epoch ends, not per update
        summary["lr_at_start"] = values["1"]
    return summary


def _validation_metric(trainer: Any) -> Union[str, List[str]]:
    """`validation_metric` as the config writes it: one signed name, or a list of them."""
    names = [f"{'+' if sign > 0 else '-'}{name}" for sign, name in trainer.metric_tracker.tracked_metrics]
    return names[0] if len(names) == 1 else names


def trial_step(trainer: Any) -> Dict[str, Any]:
    """One forward and backward pass of the training model on one micro-batch of training data (no
    optimizer update), then one validation forward whose metrics must include `validation_metric`."""
    model = trainer.model
    device = next((parameter.device for parameter in model.parameters()), torch.device("cpu"))
    training_batch = _first_micro_batch(trainer.data_loader, device)
    was_training = model.training
    model.train()
    try:
        outputs = _forward(model, training_batch, "training")
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else None
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            found = sorted(outputs) if isinstance(outputs, Mapping) else type(outputs).__name__
            raise ConfigurationError(
                f"in training, forward must return a dict with a scalar 'loss' (the executor backpropagates "
                f"it), but it returned {found} for a batch with fields {sorted(training_batch)}.",
                path="model",
            )
        if not loss.requires_grad:
            raise ConfigurationError(
                "the training loss does not depend on any trainable parameter, so no update could change "
                "the model (is every parameter frozen, or is the loss computed under no_grad?).",
                path="model",
            )
        if not math.isfinite(float(loss.detach())):
            raise ConfigurationError(f"the loss of the first training batch is {float(loss.detach())}.", path="model")
        loss.backward()
        report: Dict[str, Any] = {"training_loss": round(float(loss.detach()), 6),
                                  "batch_fields": sorted(training_batch)}
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    if trainer.validation_data_loader is not None:
        report["validation_metrics"] = _check_validation_metric(trainer, device)
    return report


def _check_validation_metric(trainer: Any, device: torch.device) -> List[str]:
    """The names the model reports in validation (``<set>_<name>`` for several sets); an error if
    `validation_metric` is not among them."""
    examples = getattr(trainer, "validation_examples", None)
    reported: List[str] = []
    for name, loader in trainer.validation_data_loaders.items():
        scoring = examples.get(name) if isinstance(examples, Mapping) else examples
        reported += [f"{name}_{metric}" if name else metric for metric in _set_metric_names(trainer.model, loader, device, scoring)]
    try:
        trainer.metric_tracker.check_names(reported)
    except ConfigurationError as error:
        raise error.locate("trainer.") from None
    return sorted(reported)


def _set_metric_names(model: Any, loader: DataLoader, device: torch.device, examples: Any) -> List[str]:
    """What the model (and a postprocessor's `examples`) report for one validation set, from its first micro-batch."""
    batch = _first_micro_batch(loader, device)
    was_training = model.training
    model.eval()
    try:
        model.get_metrics(reset=True)
        with torch.no_grad():
            outputs = _forward(model, batch, "validation")
            model.update_metrics(outputs, batch)
        reported = set(model.get_metrics(reset=True))
    finally:
        model.train(was_training)
    if isinstance(outputs.get("loss"), torch.Tensor):
        reported.add("loss")
    if examples is not None:  # a postprocessor's metrics join the model's at every validation
        reported.update(examples.postprocessor.metric_names())
    return sorted(reported)


def _first_micro_batch(loader: DataLoader, device: torch.device) -> Dict[str, torch.Tensor]:
    samples = loader.shape_samples()
    if not samples:
        raise ConfigurationError(
            f"the data fill no combined batch of {loader.combined_batch_size} rows.",
            path="data_loader",
        )
    rows = max(1, loader.combined_batch_size // loader.batch_size_factor)
    return {key: value[:rows].to(device) for key, value in samples[0].items()}


def _forward(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], phase: str) -> Any:
    try:
        return model(**batch)
    except TypeError as error:
        if "argument" not in str(error):
            raise
        raise ConfigurationError(
            f"forward cannot take the {phase} batch, whose fields are {', '.join(sorted(batch))} (the data "
            f"loader makes one per instance field, plus <name>_mask for each token-id field): {error}.",
            path="model",
        ) from None
