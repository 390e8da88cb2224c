"""What an archive's config may decide when evaluate, predict and export run its model: the settings
inference needs, from a short allow-list, and nothing about the machine.

An archive is data from whoever shared it. Its model, reader, loader and postprocessor are what
the model means, and stay; settings about the machine it runs on (torch.compile options, which can
name a compiler to run and where to write, worker process counts, cache directories, device
strings, where to write an executable cache) are the user's to choose. They
are dropped with a logged note, and the user's own flags (`--device`, `-o`) can still set them.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Tuple

logger = logging.getLogger(__name__)

INFERENCE_SECTIONS = (
    "model", "dataset_reader", "validation_dataset_reader", "data_loader", "validation_data_loader", "postprocessor",
    "trainer", "train_data_path", "validation_data_path", "test_data_path",
)
"""The top-level config keys inference reads (data paths: export's default sample data)."""

EXECUTOR_SETTINGS = (
    "type", "precision", "device_iterations", "inference_device_iterations", "replication_factor",
    "inference_replication_factor", "output_mode", "inference_output_mode", "output_period",
    # how the model is laid out on IPUs (numbers, the model's own layer path, and the IPUConfig file
    # that holds them: read as JSON, from the user's machine), not the machine
    "ipu_config", "pipeline_layers", "layers_per_ipu", "inference_layers_per_ipu", "ipus_per_replica", "inference_ipus_per_replica",
    "matmul_proportion", "inference_matmul_proportion", "enable_half_partials", "embedding_serialization_factor",
    "inference_embedding_serialization_factor",
)
"""The `trainer.executor` keys an archive may set for inference (its type is checked by the import
policy as every component name is)."""
TRAINING_ONLY_EXECUTOR_SETTINGS = (
    "gradient_accumulation", "loss_scaling", "auto_loss_scaling", "max_grad_norm", "max_grad_value", "seed",
    "optimizer_state_offchip", "replicated_tensor_sharding", "recompute_checkpoint_every_layer",
)
"""Executor keys that only training reads: dropped without a note."""
MACHINE_SETTINGS = ("cache_directory", "num_workers")
"""Reader and loader keys (at any depth) about the machine, not the data."""


def inference_settings(raw: Dict[str, Any], source: str) -> Dict[str, Any]:
    """`raw` (an archived config) cut down to what inference may take from it; what was dropped that
    a user might have expected is logged once, naming `source`."""
    dropped: List[str] = []
    config = {key: value for key, value in raw.items() if key in INFERENCE_SECTIONS}
    for section in ("dataset_reader", "validation_dataset_reader", "data_loader", "validation_data_loader"):
        if section in config:
            config[section], removed = _without_machine_settings(config[section], section)
            dropped.extend(removed)
    if "trainer" in config:
        config["trainer"], removed = _inference_trainer(config["trainer"])
        dropped.extend(removed)
    if dropped:
        logger.info(
            "Ignored settings of %s that are the user's to choose, not an archive's: %s. Set any of them yourself "
            "with -o/--overrides or --device if you want them.", source, ", ".join(dropped),
        )
    return config


def _without_machine_settings(block: Any, path: str) -> Tuple[Any, List[str]]:
    if isinstance(block, dict):
        kept, dropped = {}, []
        for key, value in block.items():
            if key in MACHINE_SETTINGS:
                dropped.append(f"{path}.{key}")
                continue
            kept[key], removed = _without_machine_settings(value, f"{path}.{key}")
            dropped.extend(removed)
        return kept, dropped
    if isinstance(block, list):
        pairs = [_without_machine_settings(value, f"{path}.{index}") for index, value in enumerate(block)]
        return [value for value, _ in pairs], [key for _, removed in pairs for key in removed]
    return block, []


def _inference_trainer(trainer: Any) -> Tuple[Dict[str, Any], List[str]]:
    """The trainer section reduced to its executor's allowed settings."""
    if not isinstance(trainer, dict):
        return {}, []
    executor = trainer.get("executor")
    if isinstance(executor, str):
        executor = {"type": executor}
    if not isinstance(executor, dict):
        return {}, []
    dropped = []
    kept = {}
    for key, value in executor.items():
        if key in EXECUTOR_SETTINGS:
            kept[key] = value
        elif key not in TRAINING_ONLY_EXECUTOR_SETTINGS:
            dropped.append(f"trainer.executor.{key}")
    return {"executor": kept}, dropped
