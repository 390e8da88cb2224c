"""optimum-graphcore's `ipu_config.json` as the poptorch executor's options.

``"executor": {"type": "poptorch", "ipu_config": "ipu_config.json"}`` reads a Graphcore `IPUConfig`
file (optimum/graphcore/ipu_configuration.py, with IPUConfig's key names). Keys written in the
executor block, and the trainer's own spellings (`num_gradient_accumulation_steps`, `grad_norm`),
win over the file. Every key IPUConfig knows is handled one by one (`IPU_CONFIG_KEYS`): mapped to an
executor key, accepted only at its "off" value, or ignored with a reason; any other key is an error
naming it and the file, as IPUConfig itself refuses unknown keys.

A relative path is read from the working directory, like every other path in an ipuflow config.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ipuflow.config import ConfigurationError, Params

logger = logging.getLogger(__name__)


def _same(value: Any) -> Any:
    return value


def _output_mode(value: Any) -> Any:
    # IPUConfig's "default" is poptorch's default: final in training, which is the executor's default.
    return None if value == "default" else value


@dataclass(frozen=True)
class KeyRule:
    """What one IPUConfig key becomes: an executor key, or a value that must be "off", or nothing."""

    executor_key: Optional[str] = None
    convert: Callable[[Any], Any] = _same
    off_values: Tuple[Any, ...] = ()
    reason: str = ""

    @property
    def mapped(self) -> bool:
        return self.executor_key is not None

    @property
    def ignored(self) -> bool:
        return self.executor_key is None and not self.off_values


_SERIALISED_LAYERS = (
    "optimum-graphcore's model rewrites (SerializedEmbedding, SerializedLinear, SplitProjection) "
    "that ipuflow does not perform; serialise the layer in the model instead"
)

IPU_CONFIG_KEYS: Dict[str, KeyRule] = {
    # Batching and output.
    "replication_factor": KeyRule("replication_factor"),
    "inference_replication_factor": KeyRule("inference_replication_factor"),
    "gradient_accumulation_steps": KeyRule("gradient_accumulation"),
    "device_iterations": KeyRule("device_iterations"),
    "inference_device_iterations": KeyRule("inference_device_iterations"),
    "output_mode": KeyRule("output_mode", _output_mode),
    # Placement and memory.
    "layers_per_ipu": KeyRule("layers_per_ipu"),
    "inference_layers_per_ipu": KeyRule("inference_layers_per_ipu"),
    "ipus_per_replica": KeyRule("ipus_per_replica"),
    "inference_ipus_per_replica": KeyRule("inference_ipus_per_replica"),
    "matmul_proportion": KeyRule("matmul_proportion"),
    "inference_matmul_proportion": KeyRule("inference_matmul_proportion"),
    "enable_half_partials": KeyRule("enable_half_partials"),
    "optimizer_state_offchip": KeyRule("optimizer_state_offchip"),
    "replicated_tensor_sharding": KeyRule("replicated_tensor_sharding"),
    "recompute_checkpoint_every_layer": KeyRule("recompute_checkpoint_every_layer"),
    "embedding_serialization_factor": KeyRule("embedding_serialization_factor"),
    "inference_embedding_serialization_factor": KeyRule("inference_embedding_serialization_factor"),
    # Everything else the executor sets.
    "executable_cache_dir": KeyRule("executable_cache_dir"),
    "seed": KeyRule("seed"),
    "auto_loss_scaling": KeyRule("auto_loss_scaling"),
    # Accepted only when off.
    "serialized_embedding_splits_per_ipu": KeyRule(off_values=(None,), reason=_SERIALISED_LAYERS),
    "inference_serialized_embedding_splits_per_ipu": KeyRule(off_values=(None,), reason=_SERIALISED_LAYERS),
    "projection_serialization_factor": KeyRule(off_values=(None, 1), reason=_SERIALISED_LAYERS),
    "inference_projection_serialization_factor": KeyRule(off_values=(None, 1), reason=_SERIALISED_LAYERS),
    "serialized_projection_splits_per_ipu": KeyRule(off_values=(None,), reason=_SERIALISED_LAYERS),
    "inference_serialized_projection_splits_per_ipu": KeyRule(off_values=(None,), reason=_SERIALISED_LAYERS),
    "parallelize_kwargs": KeyRule(off_values=(None, {}), reason=(
        "these are arguments of optimum-graphcore's PipelineMixin.parallelize(), which ipuflow's placement does "
        "not take; layers are placed from layers_per_ipu (Hugging Face models as optimum places them, others by the "
        "executor's pipeline_layers)")),
    "inference_parallelize_kwargs": KeyRule(off_values=(None, {}), reason=(
        "these are arguments of optimum-graphcore's PipelineMixin.parallelize(), which ipuflow's placement does "
        "not take; layers are placed from inference_layers_per_ipu (Hugging Face models as optimum places them, others by the "
        "executor's pipeline_layers)")),
    "explicit_ir_inference": KeyRule(off_values=(False,), reason=(
        "PopART's experimental explicit IR is not among the poptorch options the executor sets")),
    "execute_encoder_on_cpu_for_generation": KeyRule(off_values=(False,), reason=(
        "optimum-graphcore itself raises NotImplementedError for it; ipuflow has no generation")),
    # Ignored.
    "sharded_execution_for_inference": KeyRule(reason=(
        "deprecated in optimum-graphcore: inference always uses sharded execution, as ipuflow's does")),
    "enable_half_first_order_momentum": KeyRule(reason=(
        "deprecated in optimum-graphcore, which only warns about it; the optimizer's state dtypes follow "
        "the executor's precision")),
    "optimum_version": KeyRule(reason="metadata that IPUConfig.save_pretrained writes"),
    "transformers_version": KeyRule(reason="metadata that IPUConfig.save_pretrained writes"),
}
"""Every key optimum-graphcore's IPUConfig takes (and the two version stamps it saves), and its fate."""

IPU_CONFIG_DEFAULTS: Dict[str, Any] = {"inference_device_iterations": 1, "inference_replication_factor": 1}
"""IPUConfig defaults that differ from the executor's (whose inference values default to the training
ones): a file that leaves these keys out means them, so they apply unless the block sets the key."""

_POD_DEFAULT = "default"


def _pod_value(key: str, value: Any, source: str) -> Any:
    """Older IPUConfig files give per-pod values (``{"pod4": 1, "pod16": 4, "default": 1}``); without a
    pod type IPUConfig took "default", and so does ipuflow (write the value in the executor block for
    another pod)."""
    if isinstance(value, dict) and value and all(isinstance(name, str) and name.startswith(("pod", _POD_DEFAULT)) for name in value):
        if _POD_DEFAULT not in value:
            raise ConfigurationError(
                f"{source}: '{key}' gives per-pod values {value} without a \"default\" entry; write the value "
                f"for your pod in the executor block instead."
            )
        logger.info("%s: '%s' is per-pod %s; using the \"default\" entry %r", source, key, value, value[_POD_DEFAULT])
        return value[_POD_DEFAULT]
    return value


def read_ipu_config(path: Union[str, Path], source: Optional[str] = None) -> Dict[str, Any]:
    """The executor keys an optimum-graphcore `ipu_config.json` at `path` sets; `source` names it in
    errors (default: the path).

    Keys the file leaves out keep IPUConfig's defaults (`IPU_CONFIG_DEFAULTS` where they differ from
    the executor's). Unknown keys and supported-only-when-off keys set to something else are an error
    naming the key and the file; ignored keys are logged with the reason.
    """
    path = Path(path)
    source = source or str(path)
    try:
        content = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(
            f"{source}: no such file (resolved to {path.resolve()}); a relative ipu_config path is read from the "
            "working directory."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigurationError(f"{source}: cannot be read as an IPUConfig JSON file: {error}") from None
    if not isinstance(content, dict):
        raise ConfigurationError(f"{source}: expected a JSON object of IPUConfig keys, found {type(content).__name__}.")
    unknown = [key for key in content if key not in IPU_CONFIG_KEYS]
    if unknown:
        raise ConfigurationError(
            f"{source}: {', '.join(repr(key) for key in unknown)} {'is not an' if len(unknown) == 1 else 'are not'} "
            f"optimum-graphcore IPUConfig key{'' if len(unknown) == 1 else 's'} (IPUConfig refuses unknown keys too). "
            "Training arguments belong in the trainer and model blocks; see docs/ipu.md for every IPUConfig key."
        )
    options: Dict[str, Any] = dict(IPU_CONFIG_DEFAULTS)
    for key, raw in content.items():
        rule = IPU_CONFIG_KEYS[key]
        value = _pod_value(key, raw, source)
        if rule.mapped:
            converted = rule.convert(value)
            if converted is not None:
                options[rule.executor_key] = converted  # type: ignore[index]
        elif rule.off_values:
            if not any(value == off and type(value) is type(off) for off in rule.off_values):
                offs = " or ".join(json.dumps(off) for off in rule.off_values)
                raise ConfigurationError(f"{source}: '{key}' is {json.dumps(value)}, but only {offs} is supported: {rule.reason}.")
        else:
            logger.info("%s: ignoring '%s': %s", source, key, rule.reason)
    return options


@contextlib.contextmanager
def ipu_config_applied(params: Any, extras: Mapping[str, Any]) -> Iterator[Any]:
    """`params` with the keys of its `ipu_config` file filled in where the executor block and the
    trainer (`extras`) leave them out; an error about a key the file set says so."""
    if not isinstance(params, Params) or params.get("ipu_config") is None:
        yield params
        return
    merged = params.duplicate()
    location = merged.path_of("ipu_config")
    name = merged.pop("ipu_config")
    if not isinstance(name, str):
        raise ConfigurationError(path=location, expected="the path of an ipu_config.json file", found=name)
    source = f"{location} ({name})"
    from_file: List[Tuple[str, str]] = []
    optimum_names = {rule.executor_key: key for key, rule in IPU_CONFIG_KEYS.items() if rule.mapped}
    for key, value in read_ipu_config(Path(name), source).items():
        if key in merged or key in extras:
            if not (key in IPU_CONFIG_DEFAULTS and value == IPU_CONFIG_DEFAULTS[key]):  # not for IPUConfig's defaults
                logger.info("%s: %s is set in the config; the file's %r is not used", source, merged.path_of(key), value)
            continue
        merged[key] = value
        from_file.append((merged.path_of(key), optimum_names[key]))
    try:
        yield merged
    except ConfigurationError as error:
        culprits = [f"'{optimum}'" for path, optimum in from_file if error.location == path or path in error.reason]
        if not culprits:
            raise
        error.reason = f"{error.reason} (The value comes from {', '.join(culprits)} in {source}.)".lstrip()
        error.args = (error.message,)
        raise
