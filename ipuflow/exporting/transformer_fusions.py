"""ONNX Runtime's transformer optimizer on an exported file: BERT-family subgraphs fused into its
contrib operators (SkipLayerNormalization, BiasGelu, Attention, ...), which its CPU and CUDA
providers run as single kernels."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Dict

logger = logging.getLogger(__name__)

OPTIMIZE_CHOICES = ("auto", "on", "off")
"""`auto`: fuse when the graph has transformer subgraphs and the fused file passes the parity check
(else keep the plain export); `on`: fuse, and fail if the fused file fails the parity check; `off`."""


def fuse_transformer_operators(source: Path, target: Path, large: bool) -> Dict[str, int]:
    """Write `source` with its transformer subgraphs fused to `target`; the count of each fused
    operator, empty (and nothing written) when there was nothing to fuse.

    Only the optimizer's graph fusions run (opt_level 0); ONNX Runtime's own graph optimizations
    still run when a session loads the file, so the file stays provider-neutral.
    """
    import onnxruntime.transformers  # type: ignore[import-untyped]
    from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

    # Its modules log every pattern tried at INFO, some under top-level names (it puts its folder on
    # sys.path): quiet the loggers of every module from its folder while it runs.
    folder = os.path.dirname(onnxruntime.transformers.__file__)
    loggers = [logging.getLogger(name) for name, module in list(sys.modules.items())
               if (getattr(module, "__file__", None) or "").startswith(folder)]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.ERROR)
    try:
        # num_heads and hidden_size 0: read from the graph.
        optimized = optimize_model(str(source), model_type="bert", num_heads=0, hidden_size=0, opt_level=0)
        fused = {name: count for name, count in optimized.get_fused_operator_statistics().items() if count}
        if fused:
            target.parent.mkdir(parents=True, exist_ok=True)
            optimized.save_model_to_file(str(target), use_external_data_format=large)
        return fused
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def replace_with(fused: Path, output: Path) -> None:
    """Move the fused file (and its external-data file, if any) over `output`."""
    for suffix in ("", ".data"):
        source = fused.with_name(fused.name + suffix)
        if source.exists():
            source.replace(output.with_name(output.name + suffix))
    shutil.rmtree(fused.parent, ignore_errors=True)
