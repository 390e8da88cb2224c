"""A Weights & Biases run, offline unless asked otherwise, written under the serialization directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ipuflow.config import ConfigurationError
from ipuflow.training.callbacks.tracking.tracked_run import RunEnd, TrackedRun

MODE_ENV = "WANDB_MODE"


def import_wandb() -> Any:
    """The `wandb` module, or a clear error naming the extra that installs it."""
    try:
        import wandb
    except ImportError as error:
        raise ConfigurationError(
            f"The 'wandb' callback needs Weights & Biases, which cannot be imported ({error}). Install it with "
            "`pip install ipuflow[wandb]`."
        ) from None
    return wandb


class WandbRun(TrackedRun):
    """A W&B run in `project` (and `entity`), named `name`, in `mode` (default ``$WANDB_MODE``, else
    ``offline``: the run is written to ``DIR/wandb/offline-run-*`` and `wandb sync` uploads it)."""

    record_name = "wandb_run.json"

    def __init__(self, serialization_dir: str, project: str, entity: Optional[str], name: Optional[str],
                 mode: Optional[str], tags: List[str]) -> None:
        super().__init__(serialization_dir)
        self.project = project
        self.entity = entity
        self.name = name or self.serialization_dir.resolve().name
        self.mode = mode or os.environ.get(MODE_ENV) or "offline"
        self.tags = list(tags)
        self._run: Any = None
        self._config: Optional[Dict[str, Any]] = None

    def start(self, run_id: Optional[str], record: Mapping[str, Any]) -> str:
        wandb = import_wandb()
        self._run = wandb.init(
            project=self.project, entity=self.entity, name=self.name, id=run_id,
            resume="allow", dir=str(self.serialization_dir), mode=self.mode, tags=self.tags or None,
            # ipuflow's console output stays ipuflow's: wandb neither wraps stdout nor prints banners.
            settings=wandb.Settings(console="off", silent=True),
            reinit="create_new",
        )
        return str(self._run.id)

    def log_config(self, config: Dict[str, Any]) -> None:
        self._run.config.update(config, allow_val_change=True)

    def log_numbers(self, metrics: Dict[str, float], step: int) -> None:
        self._run.log(metrics, step=step)

    def log_file(self, path: Path) -> None:
        wandb = import_wandb()
        artifact = wandb.Artifact(f"model-{self._run.id}", type="model")
        # Immutable: the archive is referenced where it lies rather than copied into wandb's cache.
        artifact.add_file(str(path), policy="immutable")
        self._run.log_artifact(artifact)

    def finish(self, end: RunEnd) -> None:
        self._run.finish(exit_code=end.exit_code)
        self._run = None

    def record_fields(self) -> Dict[str, Any]:
        return {"project": self.project, "mode": self.mode}

    def describe(self) -> str:
        return f"Weights & Biases ({self.mode}, project {self.project!r}, {self.serialization_dir / 'wandb'})"
