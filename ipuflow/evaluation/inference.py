"""Building the inference executor and the loader that evaluate and predict use from an archive's config.

Both commands run through the same executor options the model was trained with (device,
precision, device iterations), so an IPU-trained model is scored on IPUs; flags override them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

from ipuflow.config import Params

if TYPE_CHECKING:
    from ipuflow.data.loader import DataLoader


def inference_executor_from_config(config: Params, model: Any, device: Optional[str] = None,
                                   executor_type: Optional[str] = None, onnx_model: Optional[str] = None) -> Any:
    """An inference executor for `model` from the config's `trainer.executor` block.

    `device` (e.g. "cpu", "cuda:0") replaces the native executor's device. `executor_type`
    "onnxruntime" runs the ONNX file `onnx_model` (written by `ipuflow export`) instead.
    """
    from ipuflow.execution.executor import StepExecutor

    if executor_type == "onnxruntime":
        return onnxruntime_executor(model, onnx_model, device)
    if executor_type not in (None, "config"):
        from ipuflow.config import ConfigurationError

        raise ConfigurationError(f"--executor: expected onnxruntime (or nothing, for the archive's own), found {executor_type!r}.")

    trainer = config.get("trainer")
    executor = trainer.get("executor") if isinstance(trainer, Params) else None
    if isinstance(executor, str):
        executor = Params({"type": executor})
    executor_config: Dict[str, Any] = executor.as_dict() if isinstance(executor, Params) else {}
    if device is not None:
        if executor_config.get("type", "native") != "native":
            from ipuflow.config import ConfigurationError

            raise ConfigurationError(f"--device applies to the native executor; this model's executor is "
                                     f"{executor_config['type']!r}.")
        executor_config["device"] = device
    return StepExecutor.from_params(Params(executor_config, history="trainer.executor."), model=model, training=False)


def onnxruntime_executor(model: Any, onnx_model: Optional[str], device: Optional[str] = None) -> Any:
    """The `onnxruntime` inference executor over `onnx_model` (the archive's model exported to ONNX)."""
    from ipuflow.config import ConfigurationError
    from ipuflow.execution.executor import StepExecutor

    if not onnx_model:
        raise ConfigurationError("--executor onnxruntime needs --onnx-model FILE: export the archive first with "
                                 "`ipuflow export ARCHIVE -o model.onnx`.")
    providers = None
    if device is not None:
        if device != "cpu" and not device.startswith("cuda"):
            raise ConfigurationError(f"--device: expected cpu or cuda[:N] for onnxruntime, found {device!r}.")
        providers = ["CPUExecutionProvider"] if device == "cpu" else ["CUDAExecutionProvider", "CPUExecutionProvider"]
    block: Dict[str, Any] = {"type": "onnxruntime", "model_file": onnx_model}
    if providers is not None:
        block["providers"] = providers
    return StepExecutor.from_params(Params(block, history="executor."), model=model, training=False)


def _loader_block(config: Params) -> Params:
    """The loader block that evaluation follows, `validation_data_loader` else `data_loader`, keeping
    its key path so that errors name the block they are about."""
    for key in ("validation_data_loader", "data_loader"):
        block = config.get(key)
        if isinstance(block, Params) and len(block):
            return block.duplicate()
    return Params({}, history="data_loader.")


def micro_batch_size_from_config(config: Params, batch_size: Optional[int] = None) -> int:
    """The micro-batch size evaluation and prediction use: `batch_size`, else the loader config's."""
    if batch_size is not None:
        return batch_size
    block = _loader_block(config)
    configured = block.get("batch_size")
    if not isinstance(configured, int):
        from ipuflow.config import ConfigurationError

        raise ConfigurationError(f"The archived config's {block.history.rstrip('.')} has no batch_size; pass --batch-size.")
    return configured


def evaluation_loader(loader_params: Params, instances: Sequence[Mapping[str, Any]],
                      batch_size: Optional[int] = None, batch_transform: Any = None) -> "DataLoader":
    """A loader for scoring or predicting `instances` from a loader config: in order, and padding the
    last combined batch instead of dropping it, so that every instance gets an output.
    `batch_size` replaces the micro-batch size; `batch_transform` is the reader's (masking)."""
    from ipuflow.data.loader import DataLoader

    params = loader_params.duplicate()
    params["shuffle"] = False
    params["pad_on_batch_axis"] = True
    if batch_size is not None:
        params["batch_size"] = batch_size
    # A columnar dataset is handed over as it is: listing it would build every instance.
    packed = callable(getattr(instances, "packed_fields", None))
    return DataLoader.from_params(params, instances=instances if packed else list(instances),
                                  batch_transform=batch_transform)


def loader_from_config(config: Params, instances: Sequence[Mapping[str, Any]],
                       batch_size: Optional[int] = None, batch_transform: Any = None) -> "DataLoader":
    """An evaluation loader over `instances` from the config's `validation_data_loader` (or
    `data_loader`) block, with the reader's `batch_transform` (masking), if any."""
    return evaluation_loader(_loader_block(config), instances, batch_size, batch_transform)
