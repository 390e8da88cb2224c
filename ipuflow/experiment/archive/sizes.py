"""Sizes an archive's config and files ask for, checked before anything is allocated for them.

A config is a few bytes; what it asks for is not: an `embedding_dim` of a billion allocates 25 GB
before the weights could disagree, a `max_length` or `inference_device_iterations` makes every
batch gigabytes, a vocabulary file of millions of lines fills memory while it is read. So the
weights' shapes are read from the safetensors header (a few KB) first, and

* the vocabulary may hold no more entries than the weights have parameters (every entry the model
  can use has at least one);
* the header's offsets and lengths are checked against the file's real size, so every shape it
  claims is paid for by bytes in the file (bounded by the archive's size limit);
* the model is first built on PyTorch's meta device (shapes, no memory) and every parameter and
  buffer compared with the weights' (one the weights lack is refused too);
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


DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
"""Bytes per element of each safetensors dtype."""


def weight_shapes(weights: Path, source: str) -> Dict[str, Tuple[int, ...]]:
    """Each tensor's shape, from the safetensors file's header, after checking that the file really
    holds every tensor the header describes (its offsets and lengths against the file's size): a
    header is written by whoever made the archive, and a shape it claims must cost its bytes."""
    try:
        size = weights.stat().st_size
        with open(weights, "rb") as file:
            prefix = file.read(8)
            if len(prefix) < 8:
                raise ValueError("the file is shorter than its header length")
            (length,) = struct.unpack("<Q", prefix)
            if length > min(MAX_HEADER_BYTES, size - 8):
                raise ValueError(f"its header claims {length:,} bytes of a {size:,}-byte file")
            header = json.loads(file.read(length))
        if not isinstance(header, dict):
            raise ValueError("its header is not an object")
        entries = {name: entry for name, entry in header.items() if name != "__metadata__"}
        return _checked_layout(entries, size - 8 - length)
    except (ValueError, KeyError, TypeError, AttributeError, struct.error) as error:
        raise ConfigurationError(f"{source}: the weights file {weights.name} is not readable safetensors ({error}).") from None


def _checked_layout(entries: Dict[str, Any], data_bytes: int) -> Dict[str, Tuple[int, ...]]:
    """The shapes of `entries` (a safetensors header), refusing any whose bytes are not in the file:
    each tensor's offsets lie inside the data, span exactly its shape's bytes, and overlap no other."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    spans = []
    for name, entry in entries.items():
        shape = tuple(entry["shape"])
        if not all(isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0 for dim in shape):
            raise ValueError(f"{name!r} has the shape {list(shape)!r:.80}")
        begin, end = entry["data_offsets"]
        if entry["dtype"] not in DTYPE_BYTES or not (isinstance(begin, int) and isinstance(end, int)):
            raise ValueError(f"{name!r} has the dtype {entry['dtype']!r:.40} or offsets {entry['data_offsets']!r:.80}")
        if not 0 <= begin <= end <= data_bytes or end - begin != math.prod(shape) * DTYPE_BYTES[entry["dtype"]]:
            raise ValueError(f"{name!r} claims the shape {list(shape)} at bytes {begin:,}..{end:,}, which the file's "
                             f"{data_bytes:,} bytes of data do not hold")
        shapes[name] = shape
        spans.append((begin, end))
    spans.sort()
    if any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])):
        raise ValueError("two tensors share bytes")
    return shapes


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


def check_model_shapes(build: Callable[[], Any], shapes: Dict[str, Tuple[int, ...]], source: str,
                       strict: bool = True) -> None:
    """Build the model with `build` on the meta device (no memory, no random initialisation) and refuse the config if a
    parameter or buffer's shape differs from the weights' or the weights lack it. A model that
    cannot be built on the meta device is refused if `strict` (an archive's), else left to the real
    build (a run directory's, which may name pretrained weights of this machine to start from)."""
    from ipuflow.experiment.archive.meta_build import building_on_meta

    config_log = logging.getLogger("ipuflow.config")
    level = config_log.level
    config_log.setLevel(logging.WARNING)  # the real build logs the config's values; once is enough
    try:
        with building_on_meta():
            model = build()
    except ConfigurationError:
        raise
    except Exception as error:  # its sizes cannot be known before allocating them: not from an archive
        if not strict:
            logger.debug("The model could not be built on the meta device to check its sizes (%s).", error)
            return
        detail = " ".join(str(error).split())[:200]
        raise ConfigurationError(
            f"{source}: its model could not be built on PyTorch's meta device ({type(error).__name__}: {detail}), "
            "so its sizes cannot be checked against its weights before memory is allocated for them."
        ) from None
    finally:
        config_log.setLevel(level)
    mismatched: List[str] = []
    for name, tensor in list(model.state_dict().items()):
        expected = shapes.get(name)
        if expected is None:
            mismatched.append(f"{name}: the config builds {list(tensor.shape)}, the weights hold no such tensor")
        elif tuple(tensor.shape) != expected:
            mismatched.append(f"{name}: the config builds {list(tensor.shape)}, the weights hold {list(expected)}")
    if mismatched:
        raise ConfigurationError(
            f"{source}: its config does not build the model its weights are for ({'; '.join(mismatched[:3])}"
            f"{'; …' if len(mismatched) > 3 else ''}). Sizes in the config (embedding_dim, hidden sizes, "
            "vocabulary) must match the weights, and the weights must hold every parameter."
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

