"""What the installed torch offers beyond torch 2.0.1, the oldest torch ipuflow supports (the one
poptorch 3.3 and 3.4, the last Poplar SDKs, are built for), and the one-sentence refusal when a
config asks for a feature this torch (or, for the 'huggingface' callback, transformers) lacks.

Every version test in ipuflow lives here, so that supporting a newer minimum is one edit.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from typing import Any, Optional, Tuple

import torch

from ipuflow.config.errors import ConfigurationError


def release_of(version: str) -> Tuple[int, int]:
    """(major, minor) of a version string such as ``2.0.1+cu117`` or ``2.6.0.dev20241001``."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"unrecognised version {version!r}")
    return int(found.group(1)), int(found.group(2))


TORCH_RELEASE = release_of(torch.__version__)
"""The installed torch's (major, minor)."""

FSDP2 = (2, 6)
"""`torch.distributed.fsdp.fully_shard` and the full-state-dict options `sharding: fsdp` relies on."""

CPU_GRAD_SCALER = (2, 3)
"""`torch.amp.GradScaler`, which also scales on the CPU (torch 2.0 has only `torch.cuda.amp.GradScaler`)."""

DYNAMO_ONNX_EXPORT = (2, 6)
"""`torch.onnx.export(dynamo=True)` with `torch.export.Dim.AUTO` dynamic shapes."""

ONNX_EXPORTER_CHOICE = (2, 5)
"""`torch.onnx.export`'s `dynamo` argument (older torch has only the TorchScript-based exporter)."""

COMPILE_ON_PYTHON_3_11 = (2, 1)
"""`torch.compile` on Python 3.11 (torch 2.0 refuses it there)."""

FUSED_ADAM_ON_CUDA = (2, 0)
"""`fused=True` for Adam and AdamW with CUDA parameters (torch 2.0 has it for no other device)."""

FUSED_SGD_ON_CUDA = (2, 3)
"""`torch.optim.SGD(fused=True)` with CUDA parameters."""

FUSED_OPTIMIZERS_ON_CPU = (2, 4)
"""`fused=True` for Adam, AdamW, SGD and Adagrad with CPU parameters."""


TRANSFORMERS_FOR_CALLBACKS = (4, 40)
"""The 'huggingface' callback: 4.29's TrainingArguments (optimum-graphcore's) need accelerate to answer
`device` and `parallel_mode`, which ipuflow answers for its executor and process group."""


def torch_at_least(release: Tuple[int, int]) -> bool:
    """Whether the installed torch is `release` (major, minor) or newer."""
    return TORCH_RELEASE >= release


def require_torch(release: Tuple[int, int], feature: str, key: Optional[str] = None, path: Optional[str] = None) -> None:
    """Raise a ConfigurationError (naming `key`, relative to the section, or the full key `path`) saying
    that `feature` needs torch `release` or newer, unless the installed torch is that new."""
    if not torch_at_least(release):
        raise ConfigurationError(
            f"{feature} needs torch>={release[0]}.{release[1]}; this environment has torch {torch.__version__}.",
            key=key, path=path,
        )


def torch_compile_available() -> bool:
    """Whether `torch.compile` runs here (torch 2.0 refuses Python 3.11 and newer)."""
    return sys.version_info < (3, 11) or torch_at_least(COMPILE_ON_PYTHON_3_11)


def require_transformers(release: Tuple[int, int], feature: str, path: Optional[str] = None) -> None:
    """Refuse `feature` (naming the key `path`) unless the installed transformers is `release` or newer."""
    import transformers

    if release_of(transformers.__version__) < release:
        raise ConfigurationError(
            f"{feature} needs transformers>={release[0]}.{release[1]}; this environment has transformers "
            f"{transformers.__version__}.", path=path,
        )


def require_torch_compile(key: Optional[str] = None) -> None:
    """Refuse `torch.compile` where the installed torch cannot run it (torch 2.0 on Python 3.11+)."""
    if not torch_compile_available():
        require_torch(COMPILE_ON_PYTHON_3_11, f"torch.compile on Python {sys.version_info[0]}.{sys.version_info[1]}", key)


def is_compiling() -> bool:
    """Whether the caller runs under `torch.compile`'s tracing (False in eager code)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return bool(compiler.is_compiling())
    # torch 2.0: dynamo is imported only once something compiles, so without it nothing is tracing.
    dynamo = sys.modules.get("torch._dynamo")
    return bool(dynamo is not None and dynamo.is_compiling())


def grad_scaler(device_type: str, init_scale: float, key: Optional[str] = None) -> Any:
    """torch's dynamic loss scaler for `device_type`, starting at `init_scale`."""
    if torch_at_least(CPU_GRAD_SCALER):
        return torch.amp.GradScaler(device_type, init_scale=init_scale)
    if device_type != "cuda":
        require_torch(CPU_GRAD_SCALER, f"dynamic loss scaling on device type {device_type!r}", key)
    return torch.cuda.amp.GradScaler(init_scale=init_scale)


@functools.lru_cache(maxsize=None)
def autocast_available(device_type: str, dtype: torch.dtype) -> bool:
    """Whether `torch.autocast` can cast to `dtype` on `device_type` (torch 2.0: only bfloat16 on the CPU)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device_type=device_type, dtype=dtype):
                pass
        except RuntimeError:  # torch 2.0 on the CPU: "AutocastCPU only support Bfloat16"
            return False
    # torch 2.0 warns "the target dtype is not supported. Disabling autocast" before that error.
    return not any("not supported" in str(warning.message) for warning in caught)


def require_autocast(device_type: str, dtype: torch.dtype, precision: str, key: Optional[str] = None) -> None:
    """Refuse `precision` where the installed torch cannot autocast to `dtype` on `device_type`
    (torch 2.0 autocasts only to bfloat16 on the CPU)."""
    if not autocast_available(device_type, dtype):
        raise ConfigurationError(
            f"{precision!r} on device type {device_type!r} needs a newer torch: torch {torch.__version__} cannot "
            f"autocast to {dtype} there (on the CPU it autocasts only to bfloat16: use 'bf16').", key=key,
        )
