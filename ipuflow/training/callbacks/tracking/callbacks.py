"""The `mlflow` and `wandb` trainer callbacks: one mapping of ipuflow's events onto a tracked run."""

from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple

from ipuflow.config import ConfigurationError
from ipuflow.config.requirements import PackageRequirement
from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.callbacks.tracking.mlflow_run import MlflowRun
from ipuflow.training.callbacks.tracking.tracked_run import RunEnd, TrackedRun
from ipuflow.training.callbacks.tracking.wandb_run import WandbRun
from ipuflow.training.events import TrainerEvent

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"  # the resolved config `ipuflow train` writes (experiment.serialization_dir)


def require_module(module: str, callback: str, extra: str) -> None:
    """Refuse, while the config is built, a tracker whose package is not installed (nothing is imported)."""
    if importlib.util.find_spec(module) is None:
        raise ConfigurationError(
            f"The {callback!r} callback needs the {module!r} package, which is not installed. Install it with "
            f"`pip install ipuflow[{extra}]`."
        )


class TrackingCallback(TrainerCallback):
    """Logs a training run to an experiment tracker.

    At `on_train_begin` the run opens (or, when the serialization directory records one, as after
    `-r`, reopens) and a new run gets the resolved config (``config.json``) as its parameters. Then:
    every `on_log` as ``train/<name>`` (`loss`, `batch_loss`, `lr`...), every validation as
    ``validation/<name>``, each epoch's training metrics as ``epoch/training_<name>``, the test
    metrics as ``test/<name>``, all at the optimizer-update step (`state.global_step`); values an
    earlier process of a resumed run already logged are not logged again. `ipuflow train` attaches
    the archive (``model.tar.gz``) and closes the run after archiving; a failed training closes it
    as failed. Only the primary process of a distributed run logs.
    """

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self._run: Optional[TrackedRun] = None

    def make_run(self) -> TrackedRun:
        """The tracker's run object (not opened)."""
        raise NotImplementedError

    @property
    def run(self) -> TrackedRun:
        """The tracked run (opened by the first event that logs)."""
        if self._run is None:
            self._run = self.make_run()
        return self._run

    def _resolved_config(self) -> Optional[Dict[str, Any]]:
        path = Path(self.serialization_dir) / CONFIG_NAME
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # trained from Python without `ipuflow train`: no config to log
        return config if isinstance(config, dict) else None

    def _open(self) -> TrackedRun:
        run = self.run
        if not run.is_open:
            run.open(self._resolved_config())
            atexit.register(self._close_at_exit)
        return run

    def _close(self, end: RunEnd) -> None:
        if self._run is not None and self._run.is_open:
            self._run.close(end)
            atexit.unregister(self._close_at_exit)

    def _close_at_exit(self) -> None:
        """A run trained from Python and never archived still ends as finished."""
        self._close(RunEnd())

    def _log(self, event: TrainerEvent, prefix: str, values: Optional[Mapping[str, Any]]) -> None:
        if values and self.is_primary:
            self._open().log_metrics({f"{prefix}{key}": value for key, value in values.items()},
                                     event.state.global_step)

    def on_train_begin(self, event: TrainerEvent) -> None:
        if self.is_primary:
            self._open()

    def on_log(self, event: TrainerEvent) -> None:
        self._log(event, "train/", event.logs)

    def on_evaluate(self, event: TrainerEvent) -> None:
        self._log(event, "validation/", event.metrics)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        metrics = event.metrics or {}
        self._log(event, "epoch/", {key: value for key, value in metrics.items() if key.startswith("training_")})

    def on_predict(self, event: TrainerEvent) -> None:
        self._log(event, "test/", event.metrics)
        if self._run is not None and self._run.is_open:
            self._run.write_record()

    def on_save(self, event: TrainerEvent) -> None:
        if self._run is not None and self._run.is_open:
            self._run.write_record()

    def on_train_end(self, event: TrainerEvent) -> None:
        if event.error is not None:
            self._close(RunEnd(event.error))
        elif self._run is not None and self._run.is_open:
            self._run.write_record()  # the run stays open for the test metrics and the archive

    def log_archive(self, archive: Path, metrics: Mapping[str, Any], step: int) -> None:
        """Attach the model archive, log the final test metrics not logged yet, and close the run."""
        if not self.is_primary:
            return
        run = self._open()
        test = {f"test/{key[len('test_'):]}": value for key, value in metrics.items() if key.startswith("test_")}
        run.log_metrics({key: value for key, value in test.items() if key not in run.logged_steps}, step)
        run.log_file(archive)
        self._close(RunEnd())


@TrainerCallback.register("mlflow")
class MlflowCallback(TrackingCallback):
    """Logs the run to MLflow: the resolved config as parameters, training logs, validation and test
    metrics at their optimizer-update step, and ``model.tar.gz`` as an artifact (see
    `TrackingCallback`). Needs ``pip install ipuflow[mlflow]``.

    With no `tracking_uri` and no ``MLFLOW_TRACKING_URI`` the run is stored under the serialization
    directory: ``mlflow/mlflow.db`` (SQLite) and ``mlflow/artifacts``; `mlflow ui
    --backend-store-uri sqlite:///DIR/mlflow/mlflow.db` shows it. ``mlflow_run.json`` records the
    run, so `-r` continues it.

    tracking_uri: the MLflow tracking server or store (default: $MLFLOW_TRACKING_URI, else the local
        store under the serialization directory).
    experiment_name: the MLflow experiment the run belongs to.
    run_name: the run's name (default: the serialization directory's name).
    tags: tags set on the run.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (PackageRequirement("mlflow", "mlflow-skinny", "mlflow"),)

    def __init__(self, serialization_dir: str, tracking_uri: Optional[str] = None, experiment_name: str = "ipuflow",
                 run_name: Optional[str] = None, tags: Optional[Dict[str, str]] = None) -> None:
        super().__init__(serialization_dir)
        require_module("mlflow", "mlflow", "mlflow")
        self._settings = dict(tracking_uri=tracking_uri, experiment_name=experiment_name, run_name=run_name,
                              tags=dict(tags or {}))

    def make_run(self) -> TrackedRun:
        return MlflowRun(self.serialization_dir, **self._settings)  # type: ignore[arg-type]


@TrainerCallback.register("wandb")
class WandbCallback(TrackingCallback):
    """Logs the run to Weights & Biases, offline by default: the resolved config, training logs,
    validation and test metrics at their optimizer-update step, and ``model.tar.gz`` as a model
    artifact (see `TrackingCallback`). Needs ``pip install ipuflow[wandb]``.

    Offline unless `mode` or ``WANDB_MODE`` says otherwise: the run is written to
    ``DIR/wandb/offline-run-*`` and `wandb sync DIR/wandb/offline-run-*` uploads it.
    ``wandb_run.json`` records the run id, so `-r` continues the same run.

    project: the W&B project (default: $WANDB_PROJECT, else "ipuflow").
    entity: the W&B team or user (default: yours).
    name: the run's display name (default: the serialization directory's name).
    mode: "offline", "online" or "disabled" (default: $WANDB_MODE, else "offline").
    tags: tags set on the run.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (PackageRequirement("wandb", "wandb", "wandb"),)

    def __init__(self, serialization_dir: str, project: Optional[str] = None, entity: Optional[str] = None,
                 name: Optional[str] = None, mode: Optional[str] = None, tags: Optional[List[str]] = None) -> None:
        super().__init__(serialization_dir)
        project = project or os.environ.get("WANDB_PROJECT") or "ipuflow"  # as the Hugging Face integration reads it
        require_module("wandb", "wandb", "wandb")
        if mode is not None and mode not in ("offline", "online", "disabled"):
            raise ConfigurationError(f"mode: expected 'offline', 'online' or 'disabled', found {mode!r}")
        self._settings = dict(project=project, entity=entity, name=name, mode=mode, tags=list(tags or []))

    def make_run(self) -> TrackedRun:
        return WandbRun(self.serialization_dir, **self._settings)  # type: ignore[arg-type]


def log_archive_to_trackers(callbacks: List[TrainerCallback], archive: Path, metrics: Mapping[str, Any],
                            step: int) -> None:
    """Give the archive `ipuflow train` just wrote, and its final metrics, to every tracking callback."""
    for callback in callbacks:
        if isinstance(callback, TrackingCallback):
            callback.log_archive(archive, metrics, step)
