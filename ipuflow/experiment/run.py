"""`ipuflow train`'s flow: config → serialization directory → TrainModel → training → archive."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.params import Overrides
from ipuflow.plugins import include_packages
from ipuflow.distributed import is_primary
from ipuflow.distributed.launch import refuse_under_torchrun, replica_group_for
from ipuflow.distributed.rank_output import on_primary, quiet_other_ranks
from ipuflow.experiment.training_data_identity import record_training_data, warn_if_training_data_changed
from ipuflow.storage import RunDirectoryLock, remove_interrupted_writes, write_json_atomically
from ipuflow.experiment.raised_limits import refuse_limits_that_train_nothing
from ipuflow.experiment.serialization_dir import (
    ARCHIVE_NAME, CONFIG_NAME, LOG_NAME, META_NAME, METRICS_NAME, configure_logging, prepare_serialization_dir,
    log_to_run_file, remove_if_empty, remove_new_entries, run_metadata,
)

if TYPE_CHECKING:
    from ipuflow.experiment.train_model import TrainModel

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
    from_checkpoint: Optional[str] = None,
) -> Dict[str, Any]:
    """Train the experiment in `config_file` into `serialization_dir`; return its final metrics.

    With `dry_run`, every object is built (data read, vocabulary counted, model and executor
    created) in a temporary directory, one training step is tried (see `ipuflow.experiment.dry_run`)
    and the plan is returned; nothing is trained or written to `serialization_dir`.
    With `compile_only`, the same build is followed by compiling every executable the run would use
    (see `compile_model`), whose report is returned. With `recover`, `from_checkpoint` names the
    checkpoint to resume from instead of the newest (see `rewind_to_checkpoint`).
    """
    params = Params.from_file(config_file, overrides, ext_vars)  # config errors first: this is quick
    include_packages(include_package)
    check_keys_before_reading_data(params)
    if not dry_run:  # a dry run plans a poptorch run on the CPU when poptorch is missing
        check_backend_before_reading_data(params)
    if compile_only:
        refuse_under_torchrun("ipuflow train --compile-only")
        return compile_model(params, file_friendly_logging)
    if dry_run:
        refuse_under_torchrun("ipuflow train --dry-run")
        from ipuflow.experiment.dry_run import dry_run as check_by_dry_run

        return check_by_dry_run(params, Path(serialization_dir), file_friendly_logging)
    if from_checkpoint is not None and not recover:
        raise ConfigurationError("--from-checkpoint names the checkpoint to resume from: it needs --recover (-r).")
    with replica_group_for(params):
        return train_model(params, serialization_dir, recover=recover, force=force,
                           file_friendly_logging=file_friendly_logging, from_checkpoint=from_checkpoint)


def check_keys_before_reading_data(params: Params) -> None:
    """Every unknown key and `type` name of the config, and every data path that is a URL, reported
    together before anything is read or written (building reports them one at a time, a trainer key
    only after the data is read)."""
    from ipuflow.config.key_check import key_errors, raise_together
    from ipuflow.experiment.local_data_paths import remote_data_path_errors
    from ipuflow.experiment.train_model import TrainModel

    raise_together(key_errors(params, TrainModel) + remote_data_path_errors(params.as_dict()))


def check_backend_before_reading_data(params: Params) -> None:
    """A missing backend (poptorch without the Poplar SDK), reported before any data is read."""
    from ipuflow.experiment.train_model import check_executor_available

    trainer = params.as_dict().get("trainer")
    if isinstance(trainer, dict):
        check_executor_available(trainer)


# What `-r` does after a command stopped in each phase outside training (training checkpoints itself).
_RESUME_AFTER = {
    "start-up": "continues the run from its latest checkpoint (or starts training if there is none yet)",
    "test evaluation": "evaluates the best model on the test set, writes metrics.json and archives the model, "
                       "without training",
    "writing metrics": "writes metrics.json and archives the model, without training",
    "archiving": "archives the model, without training",
}


def train_model(params: Params, serialization_dir: Union[str, Path], recover: bool = False, force: bool = False,
                file_friendly_logging: bool = False, from_checkpoint: Optional[str] = None) -> Dict[str, Any]:
    """Train the experiment described by `params` into `serialization_dir` (see `train_model_from_file`).

    The directory is locked for the whole command (one process per run). Its phases are start-up,
    training, test evaluation, writing metrics and archiving; the run's status, checkpointed with
    the training state, says which are done, so `recover` does only what is left, and nothing at
    all for a complete run. SIGINT/SIGTERM in any phase stop the command with a message saying
    where, and what `recover` will then do.
    """
    from ipuflow.training.state.interruption import StopOnSignal, resume_command

    directory = Path(serialization_dir)
    phase = ["start-up"]
    created = not directory.exists()

    def interrupted(signal_name: str) -> str:
        if phase[0] == "start-up" and not recover:
            then = "Nothing of the run was saved; run the command again."  # a failed start leaves nothing
        else:
            then = f"{resume_command(directory)} {_RESUME_AFTER[phase[0]]}."
        return f"Interrupted by {signal_name} during {phase[0]}: the command stopped there. {then}"

    def enter(name: str) -> None:
        phase[0] = name
        logger.debug("Phase: %s", name)

    # Under torchrun rank 0 alone holds the lock and writes the directory; the others follow it.
    lock = RunDirectoryLock(directory) if is_primary() else None
    with StopOnSignal(interrupted):
        try:
            return _train_locked(params, directory, lock, enter, recover, force, file_friendly_logging, from_checkpoint)
        except BaseException as error:
            if lock is not None and lock.held:  # never into the out.log of a run another process holds
                configure_logging(None, file_friendly_logging)  # out.log is closed before it gets the ending
                log_to_run_file(directory, logging.ERROR, _ending(error))
            raise
        finally:
            if lock is not None:
                lock.release()
            if created and is_primary():
                remove_if_empty(directory)  # a run that failed before it trained anything left it empty


def _train_locked(params: Params, directory: Path, lock: Optional[RunDirectoryLock], enter: Callable[[str], None],
                  recover: bool, force: bool, file_friendly_logging: bool, from_checkpoint: Optional[str] = None) -> Dict[str, Any]:
    from ipuflow.experiment.archive.archival import archive_model
    from ipuflow.experiment.from_checkpoint import rewind_to_checkpoint

    primary = is_primary()
    raised = on_primary(lambda: prepare_serialization_dir(directory, params, recover=recover, force=force, lock=lock))
    if from_checkpoint is not None:  # before the listing: a failed start must not remove what it moved aside
        on_primary(lambda: rewind_to_checkpoint(directory, from_checkpoint))
    before = set(os.listdir(directory)) if primary else set()
    try:
        started = _start(params, directory, recover, raised, file_friendly_logging)
    except BaseException:
        if primary:
            # A failed start leaves the directory as it found it, so the next try needs no --force: what
            # this command added goes; an existing run's files are written only once the start succeeded.
            configure_logging(None, file_friendly_logging)  # out.log may be among what goes
            remove_new_entries(directory, before)
        raise
    if isinstance(started, dict):
        return started  # the run was complete: nothing to do
    experiment = started
    try:
        metrics = experiment.run(on_phase=enter)
    except BaseException as error:
        if primary and not recover and _failed_before_first_update(experiment, error):
            # Nothing was trained, so nothing is lost: the same command runs again without --force.
            configure_logging(None, file_friendly_logging)
            remove_new_entries(directory, before)
        raise
    enter("writing metrics")
    if recover and (directory / METRICS_NAME).is_file():
        # A recovered run that had little or nothing left to do reports less than the original run
        # did; keep what the earlier metrics.json recorded and update it with what is new.
        metrics = {**_read_json(directory / METRICS_NAME), **metrics}
    if not primary:
        return metrics  # rank 0 writes the metrics and the archive
    write_json_atomically(directory / METRICS_NAME, metrics)
    enter("archiving")
    if recover:
        # meta.json describes the command that produces the archive: this one, which lists how the run
        # was started (a failed or interrupted resume leaves it as it was).
        previous = _read_json(directory / META_NAME) if (directory / META_NAME).is_file() else None
        write_json_atomically(directory / META_NAME, run_metadata(previous))
    archive = archive_model(directory, weights_sha256=experiment.trainer.get_best_weights_sha256())
    status = experiment.trainer.run_status
    if status.training_finished:
        status.archived = True
        experiment.trainer.record_run_status(status)
    logger.info("Trained model archived in %s", archive)
    _report_archive(experiment.trainer, Path(archive), metrics)
    logger.info("Metrics: %s", json.dumps(metrics, indent=2))
    logger.info("Run ended: complete (%s).", status.describe())
    return metrics


def _failed_before_first_update(experiment: "TrainModel", error: BaseException) -> bool:
    """Whether `error` (not an interruption, which prints how to resume) ended training before any update."""
    from ipuflow.training.state.interruption import TrainingInterrupted

    if isinstance(error, (TrainingInterrupted, KeyboardInterrupt)):
        return False
    state = getattr(experiment.trainer, "state", None)
    return state is not None and getattr(state, "global_step", None) == 0


def _ending(error: BaseException) -> str:
    """How out.log records the error or interruption that ended a command: as the terminal showed it."""
    from ipuflow.training.state.interruption import TrainingInterrupted

    if isinstance(error, TrainingInterrupted):
        return f"Run ended: interrupted. {error}"
    if isinstance(error, KeyboardInterrupt):
        return "Run ended: interrupted (KeyboardInterrupt)."
    if isinstance(error, ConfigurationError):
        return f"Run ended with an error: {error}"
    return f"Run ended with an error: {type(error).__name__}: {error}"


def _start(params: Params, directory: Path, recover: bool, raised: List[str],
           file_friendly_logging: bool) -> Union["TrainModel", Dict[str, Any]]:
    """Build the run's parts and record the run (config.json, meta.json); for a complete run that
    `recover` finds, its final metrics instead."""
    primary = is_primary()
    removed: List[str] = []
    plan = on_primary(lambda: refuse_limits_that_train_nothing(directory, params)) if raised else None
    if recover:
        removed = on_primary(lambda: remove_interrupted_writes(directory))
        complete = on_primary(lambda: _completed_run(directory, raised))
        if complete is not None:
            configure_logging(None, file_friendly_logging)
            quiet_other_ranks()
            logger.info("The run in %s is complete (%s); nothing to do, nothing was changed.", directory, complete[1])
            return complete[0]
    configure_logging(directory / LOG_NAME if primary else None, file_friendly_logging)
    quiet_other_ranks()
    if removed:
        logger.info("Removed temporary files left by an interrupted write: %s", ", ".join(removed))
    if raised:
        logger.info("Recovering with raised limits: %s%s", "; ".join(raised), f"; {plan}" if plan else "")
    if primary and not recover:
        # Recorded first, so that a run killed while it starts (no cleanup possible) is one `-r` continues;
        # a start that fails with an error removes them again.
        params.to_file(directory / CONFIG_NAME)
        write_json_atomically(directory / META_NAME, run_metadata())
    if primary:
        if recover:
            warn_if_training_data_changed(directory, params)
        else:
            record_training_data(directory, params)
    experiment = _build(params, directory)
    if primary and raised:
        params.to_file(directory / CONFIG_NAME)  # an existing run's config changes only once its start succeeded
    return experiment


def _report_archive(trainer: Any, archive: Path, metrics: Dict[str, Any]) -> None:
    """Hand the archive and the final metrics to the experiment trackers (`mlflow`, `wandb` callbacks)."""
    from ipuflow.training.callbacks.tracking.callbacks import log_archive_to_trackers

    try:
        log_archive_to_trackers(trainer.callbacks, archive, metrics, trainer.state.global_step)
    except Exception as error:  # noqa: BLE001 - the run is complete on disk; a tracker's failure must not undo that
        logger.warning("The run is complete in %s, but attaching the archive to the experiment tracker failed: "
                       "%s: %s", archive.parent, type(error).__name__, error)


def compile_model(params: Params, file_friendly_logging: bool = False) -> Dict[str, Any]:
    """Build the experiment in a temporary directory and compile its executables; the report.

    The serialization directory is not touched, so a later `ipuflow train` into it starts afresh;
    what lasts is the backend's compile cache (poptorch's `executable_cache_dir`, Inductor's cache).
    """
    from ipuflow.experiment.compile_only import compile_experiment

    with tempfile.TemporaryDirectory(prefix="ipuflow-compile-only-") as scratch:
        configure_logging(None, file_friendly_logging)
        return compile_experiment(_build(params, Path(scratch), compile_only=True))


def _completed_run(directory: Path, raised: List[str]) -> Optional[Tuple[Dict[str, Any], str]]:
    """(final metrics, status description) if the run in `directory` has nothing left to do."""
    from ipuflow.training.checkpoints.checkpointer import Checkpointer
    from ipuflow.training.state.run_status import RunStatus

    recorded = Checkpointer(str(directory)).latest_run_status()
    if recorded is None or raised:
        return None
    status = RunStatus.from_dict(recorded)
    if not (status.training_finished and status.archived and (directory / ARCHIVE_NAME).is_file()):
        return None
    metrics = _read_json(directory / METRICS_NAME) if (directory / METRICS_NAME).is_file() else dict(status.metrics)
    return metrics, status.describe()


def _read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigurationError(f"{path} cannot be read ({type(error).__name__}: {error}).") from None


def _build(params: Params, directory: Path, compile_only: bool = False) -> "TrainModel":
    from ipuflow.experiment.train_model import TrainModel

    # compile_only reaches the executors that take it (poptorch's compiles for an offline IPU).
    extras: Dict[str, Any] = {"compile_only": True} if compile_only else {}
    return TrainModel.from_params(params.duplicate(), serialization_dir=str(directory), **extras)
