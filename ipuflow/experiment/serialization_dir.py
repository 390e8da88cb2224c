"""The serialization directory: the rules for creating, reusing and recovering it, and its records."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ipuflow.config import ConfigurationError, Params
from ipuflow.storage import LOCK_NAME, RunDirectoryLock
from ipuflow.version import VERSION

CONFIG_NAME = "config.json"
META_NAME = "meta.json"
LOG_NAME = "out.log"
METRICS_NAME = "metrics.json"
VOCABULARY_DIR = "vocabulary"
ARCHIVE_NAME = "model.tar.gz"


# The only config keys `--recover` lets change, and only upwards: the limits that end training. A run
# that stopped at one of them continues when it is raised; a removed `max_steps` counts as raised.
RECOVERABLE_KEYS = ("trainer.num_epochs", "trainer.max_steps")


def prepare_serialization_dir(directory: Path, params: Params, recover: bool, force: bool,
                              lock: Optional[RunDirectoryLock] = None) -> List[str]:
    """Create `directory` for a new run, or check it can be recovered; nothing on disk is lost.

    A non-empty directory needs `recover` (continue the run, with the same config except a raised
    limit in `RECOVERABLE_KEYS`) or `force` (start over: the old contents are removed). `lock` is
    taken before anything is changed, so a directory in use by another process is refused whole.
    Returns the recoverable keys whose values changed (each as 'key: old → new').
    """
    refuse_unusable_directory(directory)
    if recover and force:
        raise ConfigurationError("--recover and --force cannot be used together: --recover continues the run in "
                                 f"{directory}, --force deletes it and starts over.")
    if not recover and not force:
        _refuse_contents(directory)
    if recover:
        saved = directory / CONFIG_NAME
        if not saved.is_file():
            raise ConfigurationError(
                f"--recover: {directory} holds no {CONFIG_NAME}, so there is no run to recover. Drop --recover "
                f"to start a new run there."
            )
    if lock is not None:
        lock.acquire()
    if recover:
        differences, raised = recover_differences(read_saved_config(directory / CONFIG_NAME), params)
        if differences:
            raise ConfigurationError(
                f"--recover: the config differs from the one the run in {directory} started with, at: "
                f"{'; '.join(differences)}. Recover with the same config (only {' and '.join(RECOVERABLE_KEYS)} "
                "may be raised), or start a new run in another directory."
            )
        return raised
    if force:
        _remove_contents(directory)
    else:
        _refuse_contents(directory)  # again, now that the lock keeps other processes out
    directory.mkdir(parents=True, exist_ok=True)
    return []


def refuse_unusable_directory(directory: Path) -> None:
    """A clear error if `directory` is a file, or cannot be created because of a file or permissions
    in its way (a dry run checks this too, so that the real run does not fail on it later)."""
    if directory.exists() and not directory.is_dir():
        raise ConfigurationError(
            f"Serialization directory {directory} is a file, not a directory. Choose another path for -s, or move "
            "the file away."
        )
    ancestor = directory.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigurationError(
            f"Serialization directory {directory} cannot be created: {ancestor} is a file, not a directory."
        )
    if ancestor != directory.absolute() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigurationError(
            f"Serialization directory {directory} cannot be created: no permission to create entries in {ancestor}."
        )


def _refuse_contents(directory: Path) -> None:
    if directory.is_dir() and any(entry.name != LOCK_NAME for entry in directory.iterdir()):
        raise ConfigurationError(
            f"Serialization directory {directory} already exists and is not empty. Use --recover to continue "
            f"the run in it, --force to delete it and start over, or choose another directory."
        )


def _remove_contents(directory: Path) -> None:
    """Everything in `directory` but its lock, which this process holds."""
    import shutil

    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        if entry.name == LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def read_saved_config(path: Path) -> Params:
    """The config a run saved, or an error naming the file if it cannot be read."""
    try:
        return Params(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigurationError(
            f"{path}: the run's saved config cannot be read ({type(error).__name__}: {error}). Restore it (it is "
            "also inside model.tar.gz if the run was archived), or start over with --force."
        ) from None


def recover_differences(saved: Params, current: Params) -> Tuple[List[str], List[str]]:
    """(differences that refuse `--recover`, raised limits that it allows), each 'key: old → new'."""
    old, new = saved.as_flat_dict(), current.as_flat_dict()
    refused, raised = [], []
    for difference, key in zip(config_differences(saved, current), _differing_keys(old, new)):
        if key not in RECOVERABLE_KEYS:
            refused.append(difference)
        elif _is_raised(key, old.get(key, _DEFAULT), new.get(key, _DEFAULT)):
            raised.append(difference)
        else:
            refused.append(f"{difference} (on --recover a limit can only be raised)")
    return refused, raised


_DEFAULT = object()


def _is_raised(key: str, old: Any, new: Any) -> bool:
    if key == "trainer.max_steps":
        if new is _DEFAULT or new is None:
            return True  # no limit
        return old is not _DEFAULT and old is not None and isinstance(new, int) and isinstance(old, int) and new > old
    if old is _DEFAULT:
        import inspect

        from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer

        old = inspect.signature(GradientDescentTrainer.from_partial_objects).parameters["num_epochs"].default
    return isinstance(new, int) and isinstance(old, int) and new > old


def _differing_keys(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    return [key for key in sorted(set(old) | set(new)) if key not in old or key not in new or old[key] != new[key]]


def config_differences(saved: Params, current: Params) -> List[str]:
    """Key paths whose values differ between two configs, each as 'key: saved → current'."""
    old, new = saved.as_flat_dict(), current.as_flat_dict()
    differences = []
    for key in _differing_keys(old, new):
        if key not in new:
            differences.append(f"{key} (removed; was {json.dumps(old[key])})")
        elif key not in old:
            differences.append(f"{key} (added: {json.dumps(new[key])})")
        else:
            differences.append(f"{key}: {json.dumps(old[key])} → {json.dumps(new[key])}")
    return differences


def run_metadata() -> Dict[str, Any]:
    """Versions of ipuflow, torch and Python, the packages included (`--include-package`), and the
    git commit of the working directory if any.

    `include_packages` lets a later user of the archive learn which package its config may need.
    """
    import torch

    from ipuflow.config.import_policy import included_packages

    meta: Dict[str, Any] = {
        "ipuflow_version": VERSION,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "command": " ".join(["ipuflow"] + sys.argv[1:]),
        "include_packages": included_packages(),
    }
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
        if commit.returncode == 0:
            meta["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return meta


class _ConsoleFilter(logging.Filter):
    """Keeps the per-value config log ("trainer.lr = 0.1") out of the terminal; out.log has it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.name.startswith("ipuflow.config")


def configure_logging(log_file: Optional[Path] = None, file_friendly: bool = False) -> None:
    """Log INFO to stderr (config values excepted) and everything at INFO to `log_file` if given."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        if getattr(handler, "_ipuflow", False):
            root.removeHandler(handler)
            handler.close()
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    console.addFilter(_ConsoleFilter())
    console._ipuflow = True  # type: ignore[attr-defined]
    root.addHandler(console)
    if log_file is not None:
        to_file = logging.FileHandler(log_file, mode="a")
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        to_file._ipuflow = True  # type: ignore[attr-defined]
        root.addHandler(to_file)
    if file_friendly:
        from ipuflow.training.callbacks.progress import FILE_FRIENDLY_ENVIRONMENT_VARIABLE

        os.environ[FILE_FRIENDLY_ENVIRONMENT_VARIABLE] = "1"
