"""The constructor arguments that ipuflow passes in while building, which are not config keys."""

from __future__ import annotations

from typing import Dict, Set, Tuple

# Per base class name ("*": every base). The table is per base because one name can be a config key
# in one place and injected in another (`model` is a key of the top-level config but is passed to
# the trainer; `num_epochs` is a key of the trainer but is passed to schedulers).
INJECTED_ARGUMENTS: Dict[str, Tuple[str, ...]] = {
    "*": ("serialization_dir", "vocab", "instances", "model_parameters"),
    "Trainer": ("model", "data_loader", "validation_data_loader", "validation_examples"),
    "LearningRateScheduler": ("optimizer", "num_epochs", "num_steps_per_epoch", "max_steps"),
    "MomentumScheduler": ("optimizer", "num_epochs", "num_steps_per_epoch", "max_steps"),
    "StepExecutor": ("model", "optimizer", "training"),
    "PoptorchExecutor": ("compile_only",),
    "MovingAverage": ("parameters",),
    "Predictor": ("model", "dataset_reader"),
}


def injected_arguments(cls: type) -> Set[str]:
    """The arguments ipuflow injects when it builds `cls` (or any class of its family)."""
    names = set(INJECTED_ARGUMENTS["*"])
    for klass in cls.__mro__:
        names.update(INJECTED_ARGUMENTS.get(klass.__name__, ()))
    return names
