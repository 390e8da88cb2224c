"""A batch callback that logs CPU and GPU memory to TensorBoard."""

from __future__ import annotations

import os
import resource
import sys
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

import torch

from ipuflow.training.callbacks.batch_callback import BatchCallback

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

    from ipuflow.training.events.view import TrainerView


def cpu_memory_mb() -> Dict[str, float]:
    """This process's current resident set size and its peak, in MiB."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    peak_mb = peak_kb / 1024 / (1024 if sys.platform == "darwin" else 1)
    current_mb = peak_mb
    try:
        with open("/proc/self/statm") as statm:
            current_mb = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu_rss_MB": current_mb, "cpu_peak_MB": peak_mb}


def gpu_memory_mb() -> Dict[str, float]:
    """Memory allocated and peak allocated by torch on each CUDA device, in MiB."""
    usage: Dict[str, float] = {}
    if torch.cuda.is_available():
        for device in range(torch.cuda.device_count()):
            usage[f"gpu_{device}_MB"] = torch.cuda.memory_allocated(device) / 2**20
            usage[f"gpu_{device}_peak_MB"] = torch.cuda.max_memory_allocated(device) / 2**20
    return usage


@BatchCallback.register("tensorboard-memory-usage")
class TensorBoardMemoryUsage(BatchCallback):
    """Every `interval` training host calls, writes ``memory/<name>`` scalars (CPU RSS and peak;
    per-GPU allocated and peak) to ``log/train`` at the optimizer-update step.

    interval: training host calls between two writes.
    """

    def __init__(self, serialization_dir: str, interval: int = 10) -> None:
        self._serialization_dir = serialization_dir
        self._interval = interval
        self._calls = 0
        self._writer: Optional["SummaryWriter"] = None

    def __call__(
        self,
        trainer: "TrainerView",
        batch: Mapping[str, Any],
        outputs: Mapping[str, Any],
        batch_metrics: Optional[Dict[str, float]],
        epoch: int,
        batch_number: int,
        is_training: bool,
        is_primary: bool = True,
    ) -> None:
        if not is_training or not is_primary:
            return
        self._calls += 1
        if self._calls % self._interval:
            return
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(os.path.join(self._serialization_dir, "log", "train"), filename_suffix=".memory")
        for name, value in {**cpu_memory_mb(), **gpu_memory_mb()}.items():
            self._writer.add_scalar(f"memory/{name}", value, trainer.optimizer_updates)
        self._writer.flush()

    def close(self) -> None:
        """Close the TensorBoard writer (it is opened again if training continues)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
