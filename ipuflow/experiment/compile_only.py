"""`ipuflow train --compile-only`: build the experiment, compile every executable it runs, train nothing.

optimum-graphcore's `compile_only` compiles the training and evaluation models and exits, so that a
later run finds them in `executable_cache_dir`. Here the training executor is compiled for every
batch shape of the training loader (one per length bucket), and the inference executor for the
validation loader and, with `evaluate_on_test`, the test loader: the same calls training makes
before its first step, and nothing after them.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

from ipuflow.data.loader import DataLoader
from ipuflow.execution.executor import StepExecutor


def _shapes(loader: DataLoader) -> List[Dict[str, List[int]]]:
    """The input shapes of each batch shape `loader` yields, e.g. ``[{"tokens": [8, 16]}]`` (padded to
    each batch's longest list, one sample: the executor takes every sequence length)."""
    return [{key: list(value.shape) for key, value in sample.items()} for sample in loader.shape_samples()]


def compile_experiment(experiment: Any) -> Dict[str, Any]:
    """Compile the executors of a built `TrainModel` for every input shape they will see; a report.

    The report names the backend and, for each loader (training, validation, test), the executor's
    mode, the input shapes compiled, what the backend compiled for them (and where it cached it).
    """
    trainer = experiment.trainer
    executor: StepExecutor = trainer.executor
    targets: List[Tuple[str, StepExecutor, DataLoader]] = [("training", executor, trainer.data_loader)]
    inference = executor.inference_executor()
    for name, loader in trainer.validation_data_loaders.items():  # several sets: "validation.<name>"
        targets.append((f"validation.{name}" if name else "validation", inference, loader))
    if experiment.evaluate_on_test and experiment.test_data_loader is not None:
        inference.prepare(experiment.test_data_loader, compile=False)  # compile_ahead below compiles
        targets.append(("test", inference, experiment.test_data_loader))
    compiled = []
    for name, target, loader in targets:
        started = time.perf_counter()
        what = target.compile_ahead(loader)
        compiled.append({
            "loader": name,
            "mode": "training" if target.training else "inference",
            "input_shapes": _shapes(loader),
            "padding": loader.padding_plan(),
            "compiled": what,
            "seconds": round(time.perf_counter() - started, 2),
        })
        if target.is_attached:
            target.detach()  # one executor holds the device at a time, as IPUTrainer does between train and eval
    return {"backend": StepExecutor.registered_name(type(executor)) or type(executor).__name__, "compiled": compiled}
