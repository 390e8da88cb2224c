"""A callback for scripts/bench/tasks.py: how long an ipuflow run spent training, apart from validation.

Loaded with `--include-package task_timing` (scripts/bench on PYTHONPATH) and added with
`-o '{"trainer.callbacks": [{"type": "bench_task_timing"}]}'`. It writes `bench_timing.json` into the
serialization directory: the seconds from the start of training to its end, the seconds of those spent
in validation (from the end of the last training update before it to the validation's end), their difference (the
training time the Hugging Face Trainer's `train_runtime` measures, which validates nowhere by default),
and the optimizer updates made.
"""
import json
import os
import time

from ipuflow.training.callbacks import TrainerCallback


@TrainerCallback.register("bench_task_timing")
class TaskTiming(TrainerCallback):
    """Times training and validation separately; writes bench_timing.json at the end of training."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self._start = 0.0
        self._last_update_end = 0.0
        self._validation_start = None
        self._validation_seconds = 0.0

    def on_train_begin(self, event) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, event) -> None:
        self._last_update_end = time.perf_counter()

    def on_prediction_step(self, event) -> None:
        # Fired after each validation batch: the validation began when the training updates stopped.
        if self._validation_start is None and self._start:
            self._validation_start = self._last_update_end or self._start

    def on_evaluate(self, event) -> None:
        if self._validation_start is not None:
            self._validation_seconds += time.perf_counter() - self._validation_start
            self._validation_start = None

    def on_train_end(self, event) -> None:
        if not self._start:
            return
        total = time.perf_counter() - self._start
        record = {"train_and_validation_seconds": total, "validation_seconds": self._validation_seconds,
                  "training_seconds": total - self._validation_seconds, "updates": int(event.state.global_step)}
        with open(os.path.join(self.serialization_dir, "bench_timing.json"), "w") as handle:
            json.dump(record, handle)
        self._start = 0.0
