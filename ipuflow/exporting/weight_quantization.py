"""ONNX Runtime's dynamic quantization of an exported file: the weights of its matrix products
stored as int8, the activations quantized on the fly at each call, so that its CPU kernels run
integer matrix products (VNNI/AMX where the CPU has them)."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)

QUANTIZE_CHOICES = ("off", "int8")
"""`off`: float weights, as exported; `int8`: ONNX Runtime's dynamic quantization of the weights."""

QUANTIZED_TOLERANCE = 0.1
"""The default parity tolerance of an int8 file: int8 weights move a transformer's logits by a few
hundredths, so the check guards against a broken graph, not against rounding."""


def quantize_weights(source: Path, target: Path, large: bool) -> None:
    """Write `source` with int8 weights (ONNX Runtime's `quantize_dynamic`, signed weights) to `target`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    target.parent.mkdir(parents=True, exist_ok=True)
    # Signed int8 weights: ONNX Runtime's recommended type for its CPU kernels with dynamic quantization.
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, use_external_data_format=large)
