"""ONNX Runtime's dynamic quantization of an exported file: the weights of its matrix products
stored as int8, the activations quantized on the fly at each call, so that its CPU kernels run
integer matrix products (VNNI/AMX where the CPU has them)."""

from __future__ import annotations

import logging
from pathlib import Path

QUANTIZE_CHOICES = ("off", "int8")
"""`off`: float weights, as exported; `int8`: ONNX Runtime's dynamic quantization of the weights."""

QUANTIZED_TOLERANCE = 0.5
"""The default parity tolerance of an int8 file, as a fraction of each output's largest magnitude.
Int8 weights move a briefly trained MiniLM's logits by a quarter of their largest magnitude (0.10
of 0.43), so this check only catches a broken graph; what quantization costs is measured on the
metrics (`ipuflow evaluate --executor onnxruntime`)."""


def quantize_weights(source: Path, target: Path, large: bool) -> None:
    """Write `source` with int8 weights (ONNX Runtime's `quantize_dynamic`, signed weights) to `target`."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    from ipuflow.exporting.onnx_export import ExportError

    target.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    # It advises, on the root logger and every time, a pre-processing step meant for static
    # quantization's calibration; dynamic quantization has nothing to calibrate.
    advice = _DropMessage("Please consider to run pre-processing before quantization")
    root.addFilter(advice)
    try:
        # Signed int8 weights: ONNX Runtime's recommended type for its CPU kernels with dynamic quantization.
        # ONNX's shape inference gives no type to the outputs of ONNX Runtime's fused operators
        # (BiasGelu, SkipLayerNormalization, ...): the exported graph computes in float32.
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, use_external_data_format=large,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    except Exception as error:  # noqa: BLE001 - its own errors are plain RuntimeErrors: say which step failed
        raise ExportError(f"ONNX Runtime could not quantize {source.name} to int8 weights: {error}") from error
    finally:
        root.removeFilter(advice)


class _DropMessage(logging.Filter):
    """Drops the records whose message starts with `prefix`."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)
