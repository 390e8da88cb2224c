"""`ipuflow train`'s flow: config → serialization directory → TrainModel → training → archive."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.params import Overrides
from ipuflow.config.plugins import include_packages
from ipuflow.storage import write_json_atomically
from ipuflow.experiment.serialization_dir import (
    CONFIG_NAME, LOG_NAME, META_NAME, METRICS_NAME, configure_logging, prepare_serialization_dir, run_metadata,
)

logger = logging.getLogger(__name__)


def train_model_from_file(
    config_file: Union[str, Path],
    serialization_dir: Union[str, Path],
    overrides: Union[Overrides, Sequence[Overrides]] = "",
    recover: bool = False,
    force: bool = False,
    dry_run: bool = False,
    include_package: Sequence[str] = (),
    ext_vars: Optional[Mapping[str, str]] = None,
    file_friendly_logging: bool = False,
    compile_only: bool = False,
) -> Dict[str, Any]:
    """Train the experiment in `config_file` into `serialization_dir`; return its final metrics.

    With `dry_run`, every object is built (data read, vocabulary counted, model and executor
    created) in a temporary directory, one training step is tried (see `ipuflow.experiment.dry_run`)
    and the plan is returned; nothing is trained or written to `serialization_dir`.
    With `compile_only`, the same build is followed by compiling every executable the run would use
    (see `compile_model`), whose report is returned.
    """
    params = Params.from_file(config_file, overrides, ext_vars)  # config errors first: this is quick
    include_packages(include_package)
    if compile_only:
        return compile_model(params, file_friendly_logging)
    if dry_run:
        from ipuflow.experiment.dry_run import dry_run as check_by_dry_run

        return check_by_dry_run(params, Path(serialization_dir), file_friendly_logging)
    return train_model(params, serialization_dir, recover=recover, force=force,
                       file_friendly_logging=file_friendly_logging)


def train_model(params: Params, serialization_dir: Union[str, Path], recover: bool = False, force: bool = False,
                file_friendly_logging: bool = False) -> Dict[str, Any]:
    """Train the experiment described by `params` into `serialization_dir` (see `train_model_from_file`)."""
    from ipuflow.archival import archive_model

    directory = Path(serialization_dir)
    prepare_serialization_dir(directory, params, recover=recover, force=force)
    configure_logging(directory / LOG_NAME, file_friendly_logging)
    if not recover:
        params.to_file(directory / CONFIG_NAME)
    write_json_atomically(directory / META_NAME, run_metadata())
    experiment = _build(params, directory)
    metrics = experiment.run()
    if recover and (directory / METRICS_NAME).is_file():
        # A recovered run that had little or nothing left to do reports less than the original run
        # did; keep what the earlier metrics.json recorded and update it with what is new.
        metrics = {**json.loads((directory / METRICS_NAME).read_text()), **metrics}
    write_json_atomically(directory / METRICS_NAME, metrics)
    archive = archive_model(directory)
    logger.info("Trained model archived in %s", archive)
    logger.info("Metrics: %s", json.dumps(metrics, indent=2))
    return metrics


def compile_model(params: Params, file_friendly_logging: bool = False) -> Dict[str, Any]:
    """Build the experiment in a temporary directory and compile its executables; the report.

    The serialization directory is not touched, so a later `ipuflow train` into it starts afresh;
    what lasts is the backend's compile cache (poptorch's `executable_cache_dir`, Inductor's cache).
    """
    from ipuflow.experiment.compile_only import compile_experiment

    with tempfile.TemporaryDirectory(prefix="ipuflow-compile-only-") as scratch:
        configure_logging(None, file_friendly_logging)
        return compile_experiment(_build(params, Path(scratch)))


def _build(params: Params, directory: Path) -> Any:
    from ipuflow.experiment.train_model import TrainModel

    return TrainModel.from_params(params.duplicate(), serialization_dir=str(directory))
