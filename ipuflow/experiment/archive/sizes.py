"""Sizes an archive's config and files ask for, checked before anything is allocated for them.

A config is a few bytes; what it asks for is not: an `embedding_dim` of a billion allocates 25 GB
before the weights could disagree, a `max_length` or `inference_device_iterations` makes every
batch gigabytes, a vocabulary file of millions of lines fills memory while it is read. So the
weights' shapes are read from the safetensors header (a few KB) first, and

* the vocabulary may hold no more entries than the weights have parameters (every entry the model
  can use has at least one);
* the model is first built on PyTorch's meta device (shapes, no memory) and each parameter's shape
  compared with the weights';
* one inference batch (micro-batch × device iterations × replicas × sequence length) may hold at
  most `MAX_BATCH_ELEMENTS` values.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from ipuflow.config import ConfigurationError

logger = logging.getLogger(__name__)

MAX_HEADER_BYTES = 100 * 2**20
"""The largest safetensors header read (safetensors itself refuses larger)."""
MAX_BATCH_ELEMENTS = 2**26
"""The most values one padded inference batch of an archive may hold (512 MB of int64 ids)."""


def weight_shapes(weights: Path, source: str) -> Dict[str, Tuple[int, ...]]:
    """Each tensor's shape, from the safetensors file's header alone."""
    try:
        with open(weights, "rb") as file:
            prefix = file.read(8)
            if len(prefix) < 8:
                raise ValueError("the file is shorter than its header length")
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                raise ValueError(f"its header claims {length:,} bytes")
            header = json.loads(file.read(length))
        return {name: tuple(int(size) for size in entry["shape"]) for name, entry in header.items() if name != "__metadata__"}
    except (ValueError, KeyError, TypeError, AttributeError, struct.error) as error:
        raise ConfigurationError(f"{source}: the weights file {weights.name} is not readable safetensors ({error}).") from None


def check_vocabulary_size(vocabulary: Path, shapes: Dict[str, Tuple[int, ...]], source: str) -> None:
    """Refuse a vocabulary with more entries than the weights have parameters, before it is read."""
    if not vocabulary.is_dir():
        return
    parameters = sum(math.prod(shape) for shape in shapes.values())
    entries = 0
    for path in sorted(vocabulary.glob("*.txt")):
        with open(path, "rb") as file:
            for _ in file:
                entries += 1
                if entries > parameters:
                    raise ConfigurationError(
                        f"{source}: its vocabulary ({path.parent.name}/) holds more entries than its weights have "
                        f"parameters ({parameters:,}), which no model it could build would use; the archive is damaged "
                        "or made to exhaust memory."
                    )


def check_model_shapes(build: Callable[[], Any], shapes: Dict[str, Tuple[int, ...]], source: str) -> None:
    """Build the model with `build` on the meta device (no memory) and refuse the config if a
    parameter or buffer's shape differs from the weights'. A model that cannot be built on the meta
    device is left to the real build."""
    import torch

    config_log = logging.getLogger("ipuflow.config")
    level = config_log.level
    config_log.setLevel(logging.WARNING)  # the real build logs the config's values; once is enough
    try:
        with torch.device("meta"):
            model = build()
    except ConfigurationError:
        raise
    except Exception as error:  # a component that needs real tensors to build: checked on loading instead
        logger.debug("The model could not be built on the meta device to check its sizes (%s).", error)
        return
    finally:
        config_log.setLevel(level)
    mismatched: List[str] = []
    for name, tensor in list(model.state_dict().items()):
        expected = shapes.get(name)
        if expected is not None and tuple(tensor.shape) != expected:
            mismatched.append(f"{name}: the config builds {list(tensor.shape)}, the weights hold {list(expected)}")
    if mismatched:
        raise ConfigurationError(
            f"{source}: its config does not build the model its weights are for ({'; '.join(mismatched[:3])}"
            f"{'; …' if len(mismatched) > 3 else ''}). Sizes in the config (embedding_dim, hidden sizes, "
            "vocabulary) must match the weights."
        )


def check_batch_size(config: Dict[str, Any], source: str) -> None:
    """Refuse loader and executor sizes of an archive whose inference batch would hold more than
    `MAX_BATCH_ELEMENTS` values."""
    loader = config.get("validation_data_loader") or config.get("data_loader") or {}
    executor = (config.get("trainer") or {}).get("executor") or {}
    if not isinstance(loader, dict) or not isinstance(executor, dict):
        return
    factors = {
        "batch_size": loader.get("batch_size"),
        "max_length": max([loader.get("max_length") or 1, *(loader.get("length_buckets") or [1])], key=_number),
        "trainer.executor.inference_device_iterations": executor.get("inference_device_iterations") or executor.get("device_iterations"),
        "trainer.executor.inference_replication_factor": executor.get("inference_replication_factor") or executor.get("replication_factor"),
    }
    values = {key: _number(value) for key, value in factors.items()}
    if math.prod(values.values()) > MAX_BATCH_ELEMENTS:
        given = ", ".join(f"{key} {value:,}" for key, value in values.items() if value > 1)
        raise ConfigurationError(
            f"{source}: its config asks for inference batches of {math.prod(values.values()):,} values ({given}), more "
            f"than the {MAX_BATCH_ELEMENTS:,} an archive may ask for. Set smaller sizes yourself with --batch-size or "
            "-o/--overrides (for example data_loader.max_length)."
        )


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

