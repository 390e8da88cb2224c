"""Skip markers for the tests that need more of torch than torch 2.0.1 (poptorch's torch, the CI's
second leg) offers; ipuflow itself refuses those features there with a ConfigurationError."""

from __future__ import annotations

import pytest
import torch

from ipuflow.torch_features import CPU_GRAD_SCALER, autocast_available, torch_at_least, torch_compile_available


def _cpu_half_matmul() -> bool:
    try:
        torch.ones(2, 2, dtype=torch.half) @ torch.ones(2, 2, dtype=torch.half)
    except RuntimeError:  # torch 2.0: "addmm_impl_cpu_" not implemented for 'Half'
        return False
    return True


needs_cpu_half_kernels = pytest.mark.skipif(
    not _cpu_half_matmul(), reason=f"torch {torch.__version__} has no float16 matmul on the CPU, where the stand-in runs a half model")
needs_cpu_fp16_autocast = pytest.mark.skipif(
    not autocast_available("cpu", torch.float16), reason=f"torch {torch.__version__} autocasts only to bfloat16 on the CPU")
needs_cpu_grad_scaler = pytest.mark.skipif(
    not torch_at_least(CPU_GRAD_SCALER), reason="dynamic loss scaling on the CPU needs torch>=2.3")
needs_torch_compile = pytest.mark.skipif(
    not torch_compile_available(), reason=f"torch {torch.__version__} cannot torch.compile on this Python")
