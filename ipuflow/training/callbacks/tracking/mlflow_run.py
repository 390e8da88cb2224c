"""An MLflow run through `MlflowClient` (no global "active run", so user code using `mlflow` is unaffected)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ipuflow.config import ConfigurationError, Params
from ipuflow.training.callbacks.tracking.tracked_run import RunEnd, TrackedRun

MLFLOW_DIR = "mlflow"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"


def import_mlflow_client() -> Any:
    """`mlflow.tracking.MlflowClient`, or a clear error naming the extra that installs it."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as error:
        raise ConfigurationError(
            f"The 'mlflow' callback needs MLflow, which cannot be imported ({error}). Install it with "
            "`pip install ipuflow[mlflow]` (mlflow-skinny, with SQLAlchemy for the local store)."
        ) from None
    return MlflowClient


class MlflowRun(TrackedRun):
    """A run in `tracking_uri` (default: ``$MLFLOW_TRACKING_URI``, else a SQLite store in
    ``DIR/mlflow/mlflow.db`` with artifacts in ``DIR/mlflow/artifacts``), in experiment
    `experiment_name`, named `run_name`."""

    record_name = "mlflow_run.json"

    def __init__(self, serialization_dir: str, tracking_uri: Optional[str], experiment_name: str,
                 run_name: Optional[str], tags: Mapping[str, str]) -> None:
        super().__init__(serialization_dir)
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name or self.serialization_dir.resolve().name
        self.tags = dict(tags)
        self._client: Any = None

    def _local_store(self) -> Path:
        return (self.serialization_dir / MLFLOW_DIR).resolve()

    def _resolve_uri(self, record: Mapping[str, Any]) -> str:
        if isinstance(record.get("tracking_uri"), str):
            return record["tracking_uri"]  # the store the run was started in, so that `-r` finds it
        if self.tracking_uri:
            return self.tracking_uri
        if os.environ.get(TRACKING_URI_ENV):
            return os.environ[TRACKING_URI_ENV]
        # MLflow 3 keeps its plain-file store only for old data; SQLite is its local backend.
        self._local_store().mkdir(parents=True, exist_ok=True)
        return self._local_uri()

    def _local_uri(self) -> str:
        return f"sqlite:///{self._local_store() / 'mlflow.db'}"

    def start(self, run_id: Optional[str], record: Mapping[str, Any]) -> str:
        client_class = import_mlflow_client()
        self.tracking_uri = self._resolve_uri(record)
        self._client = client_class(tracking_uri=self.tracking_uri)
        if run_id is not None:
            self._client.get_run(run_id)  # fails clearly if the store no longer has it
            self._client.update_run(run_id, status="RUNNING")
            return run_id
        experiment = self._client.get_experiment_by_name(self.experiment_name)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            # The local store's artifacts stay under the serialization directory (not in ./mlartifacts).
            location = (self._local_store() / "artifacts").as_uri() if self.tracking_uri == self._local_uri() else None
            experiment_id = self._client.create_experiment(self.experiment_name, artifact_location=location)
        run = self._client.create_run(experiment_id, run_name=self.run_name, tags=self.tags)
        return str(run.info.run_id)

    def log_config(self, config: Dict[str, Any]) -> None:
        from mlflow.entities import Param

        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH
        except ImportError:  # older MLflow: its documented limits
            MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH = 500, 100
        flat = Params(config).as_flat_dict()
        params = [Param(key, str(value)[:MAX_PARAM_VAL_LENGTH]) for key, value in flat.items()]
        for start in range(0, len(params), MAX_PARAMS_TAGS_PER_BATCH):
            self._client.log_batch(self.run_id, params=params[start:start + MAX_PARAMS_TAGS_PER_BATCH])

    def log_numbers(self, metrics: Dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        entries: List[Any] = [Metric(key, value, timestamp, step) for key, value in metrics.items()]
        self._client.log_batch(self.run_id, metrics=entries)

    def log_file(self, path: Path) -> None:
        self._client.log_artifact(self.run_id, str(path))

    def finish(self, end: RunEnd) -> None:
        # KILLED is MLflow's status for a run its user stopped; ipuflow's is checkpointed, and -r reopens it.
        status = "FAILED" if end.failed else "KILLED" if end.signal is not None else "FINISHED"
        self._client.set_terminated(self.run_id, status=status)

    def steps_in_tracker(self) -> Dict[str, int]:
        run = self._client.get_run(self.run_id)
        return {
            key: max(metric.step for metric in self._client.get_metric_history(self.run_id, key))
            for key in run.data.metrics
        }

    def record_fields(self) -> Dict[str, Any]:
        return {"tracking_uri": self.tracking_uri, "experiment_name": self.experiment_name}

    def describe(self) -> str:
        return f"MLflow ({self.tracking_uri}, experiment {self.experiment_name!r})"
