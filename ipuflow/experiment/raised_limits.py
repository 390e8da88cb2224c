"""`--recover` with raised limits on a run whose training had ended: whether training continues,
decided before anything in the run directory changes."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Optional

from ipuflow.config import ConfigurationError, Params


def _trainer_value(params: Params, key: str) -> Any:
    trainer = params.as_dict().get("trainer") or {}
    if key in trainer:
        return trainer[key]
    from ipuflow.training.loop.gradient_descent_trainer import GradientDescentTrainer

    return inspect.signature(GradientDescentTrainer.from_partial_objects).parameters[key].default


def refuse_limits_that_train_nothing(directory: Path, params: Params) -> Optional[str]:
    """A `ConfigurationError` (nothing on disk is touched) if the run in `directory` had finished
    training and the limits in `params` (`trainer.num_epochs`, `max_steps`, `patience`) still train
    nothing, saying which to change; else what the recover will do (None if training had not ended)."""
    from ipuflow.training.checkpoints.checkpointer import Checkpointer
    from ipuflow.training.state.run_status import RunStatus

    recorded = Checkpointer(str(directory)).latest_run_status()
    if recorded is None:
        return None
    status = RunStatus.from_dict(recorded)
    if not status.training_finished:
        return None
    num_epochs, max_steps, patience = (_trainer_value(params, key) for key in ("num_epochs", "max_steps", "patience"))
    why = status.why_no_training(num_epochs, max_steps, patience)
    if why is not None:
        raise ConfigurationError(f"--recover: {why} Nothing in {directory} was changed.")
    limit = f"{num_epochs} epochs" + ("" if max_steps is None else f" or {max_steps} optimizer updates")
    return (f"training continues from epoch {status.epochs_completed} (optimizer update "
            f"{status.optimizer_updates}) up to {limit}")
