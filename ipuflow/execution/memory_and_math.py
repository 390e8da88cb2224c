"""Training settings of the native executor that trade compute for memory or precision for speed:
activation (gradient) checkpointing and TF32 matrix multiplication on CUDA."""

from __future__ import annotations

import torch

from ipuflow.config import ConfigurationError


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Have `model` recompute its activations in the backward pass instead of keeping them, through
    its own `gradient_checkpointing_enable` (the `huggingface` model, transformers models)."""
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if not callable(enable):
        raise ConfigurationError(
            f"the model ({type(model).__name__}) has no gradient_checkpointing_enable method, so it cannot "
            f"recompute activations; models of type 'huggingface' can.",
            key="gradient_checkpointing",
        )
    enable()


def enable_tf32(device: torch.device) -> None:
    """Let CUDA matrix multiplications and convolutions use TF32 (10-bit mantissa inputs, float32
    accumulation), as Hugging Face's `tf32` does; only on CUDA."""
    if device.type != "cuda":
        raise ConfigurationError(key="tf32", expected="a CUDA device (TF32 is an NVIDIA Ampere+ mode)", found=f"device {device}")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
