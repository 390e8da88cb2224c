"""A trainer callback for `bench_startup.py`: records when the first training step begins and ends
and when the first validation ends (wall time since the parent started the process, and this
process's CPU time), which libraries are imported by then, and ends the process there.

Loaded with `--include-package startup_probe` (scripts/bench on PYTHONPATH); writes JSON to the file
named by IPUFLOW_STARTUP_PROBE.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict

from ipuflow.training.callbacks.callback import TrainerCallback, TrainerEvent

LIBRARIES = ("torch", "torchmetrics", "transformers", "tokenizers", "scipy", "sklearn", "onnx", "onnxruntime",
             "tensorboard", "sympy", "pandas", "datasets", "numpy", "tqdm", "safetensors", "click", "yaml")


def _moment() -> Dict[str, Any]:
    started = float(os.environ["IPUFLOW_STARTUP_T0"])
    return {"wall_s": time.time() - started, "cpu_s": time.process_time(),
            "libraries": sorted(name for name in LIBRARIES if name in sys.modules)}


@TrainerCallback.register("startup_probe")
class StartupProbe(TrainerCallback):
    """Records the first step's begin and end and the first validation's end, then exits the
    process (the rest of the run is not needed)."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.report: Dict[str, Any] = {}

    def on_step_begin(self, event: TrainerEvent) -> None:
        """The first step is about to run."""
        self.report.setdefault("first_step_begin", _moment())

    def on_step_end(self, event: TrainerEvent) -> None:
        """The first step ran."""
        self.report.setdefault("first_step_end", _moment())

    def on_evaluate(self, event: TrainerEvent) -> None:
        """The first validation ran: write the report and end the process."""
        self.report["first_validation_end"] = _moment()
        with open(os.environ["IPUFLOW_STARTUP_PROBE"], "w") as file:
            json.dump(self.report, file)
        sys.stderr.flush()
        os._exit(0)
