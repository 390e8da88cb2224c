"""The serialization directory: the rules for creating, reusing and recovering it, and its records."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

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
# that stopped at one of them continues when it is raised; a removed `max_steps` or `patience` counts
# as raised (a run that stopped early continues when its patience is raised or cleared).
RECOVERABLE_KEYS = ("trainer.num_epochs", "trainer.max_steps", "trainer.patience")


def prepare_serialization_dir(directory: Path, params: Params, recover: bool, force: bool,
                              lock: Optional[RunDirectoryLock] = None) -> List[str]:
    """Create `directory` for a new run, or check it can be recovered; nothing on disk is lost.

    A non-empty directory needs `recover` (continue the run, with the same config except a raised
    limit in `RECOVERABLE_KEYS`) or `force` (start over: the old contents are removed). `lock` is
    taken before anything is changed, so a directory in use by another process is refused whole.
    Returns the recoverable keys whose values changed (each as 'key: old → new').
    """
    refuse_unusable_directory(directory)
    if lock is not None:
        # Before judging the contents: another start may be writing them (it is in use, not a finished run).
        lock.refuse_if_held_elsewhere()
    if recover and force:
        raise ConfigurationError("--recover and --force cannot be used together: --recover continues the run in "
                                 f"{directory}, --force deletes it and starts over.")
    if not recover and not force:
        _refuse_contents(directory)
    if force:
        refuse_forced_removal(directory)  # before the lock file is written into it
    if recover:
        saved = directory / CONFIG_NAME
        if not saved.is_file():
            raise ConfigurationError(
                f"--recover: {directory} holds no {CONFIG_NAME}, so there is no run to recover. Drop --recover "
                f"to start a new run there."
            )
    make_serialization_dir(directory)  # the lock file goes into it
    if lock is not None:
        lock.acquire()
    if recover:
        differences, raised = recover_differences(read_saved_config(directory / CONFIG_NAME), params)
        if differences:
            raise ConfigurationError(
                f"--recover: the config differs from the one the run in {directory} started with, at: "
                f"{'; '.join(differences)}. Recover with the same config (only {', '.join(RECOVERABLE_KEYS)} "
                "may be raised), or start a new run in another directory."
            )
        return raised
    if force:
        _remove_contents(directory)
    else:
        _refuse_contents(directory)  # again, now that the lock keeps other processes out
    make_serialization_dir(directory)
    return []


def make_serialization_dir(directory: Path) -> None:
    """Create `directory` and its parents, or explain as a usage error why it cannot be created."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        # Permission bits can say yes where the filesystem says no (/proc, a read-only mount, a full disk).
        raise ConfigurationError(
            f"{directory} cannot be created ({error.strerror or type(error).__name__}). Choose a directory you "
            "can write to.", path="-s/--serialization-dir") from None


def refuse_unusable_directory(directory: Path) -> None:
    """A clear error if `directory` is a file, or cannot be created because of a file or permissions
    in its way (a dry run checks this too, so that the real run does not fail on it later)."""
    if directory.is_symlink() and not directory.exists():
        raise ConfigurationError(
            f"Serialization directory {directory} is a symbolic link to {os.readlink(directory)}, which does not "
            "exist. Create the directory it points to, remove the link, or choose another path for -s."
        )
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


def refuse_forced_removal(directory: Path) -> None:
    """A clear error unless `--force` may empty `directory`: it must not be a home, a filesystem root,
    the working directory or one above it, and if it holds anything, that must be recognisably an
    ipuflow run (see `is_run_directory`); ipuflow deletes only what it created."""
    resolved = directory.resolve()
    protected = protected_reason(resolved)
    if protected:
        raise ConfigurationError(
            f"--force refuses to delete the contents of {directory}: it is {protected}. --force empties a run "
            "directory that ipuflow created; give -s a directory of its own for the run."
        )
    if not resolved.is_dir():
        return
    found = sorted(entry.name for entry in resolved.iterdir() if entry.name != LOCK_NAME)
    if found and not is_run_directory(resolved):
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise ConfigurationError(
            f"--force refuses to delete the contents of {directory}: it is not an ipuflow run directory (no "
            f"{LOG_NAME} and {META_NAME} written by ipuflow; it holds {shown}). ipuflow deletes only what it created: choose an "
            "empty or new directory for -s, or remove these files yourself."
        )


def is_run_directory(directory: Path) -> bool:
    """Whether `directory` is recognisably one `ipuflow train` created: it holds the log that
    ipuflow's loggers write first, and the `meta.json` that records the ipuflow version of the run
    or (a start stopped before meta.json) its config. A `meta.json` alone is not a run: an extracted
    model.tar.gz holds one too."""
    try:
        with open(directory / LOG_NAME, "rb") as log:
            if b" ipuflow." not in log.read(1 << 16):
                return False
    except OSError:
        return False
    try:
        meta = json.loads((directory / META_NAME).read_text(encoding="utf-8"))
        if isinstance(meta, dict) and "ipuflow_version" in meta:
            return True
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    return (directory / CONFIG_NAME).is_file()


def protected_reason(resolved: Path) -> str:
    """Why `resolved` (an absolute path, symlinks resolved) must never be emptied or replaced, or ''
    (`train --force` and `export-pretrained` both refuse these)."""
    if resolved == Path(resolved.anchor) or (resolved.is_dir() and os.path.ismount(resolved)):
        return "a filesystem root"
    homes = {Path(os.path.expanduser("~"))}
    if os.environ.get("HOME"):
        homes.add(Path(os.environ["HOME"]))
    try:
        import pwd

        homes.update(Path(user.pw_dir) for user in pwd.getpwall() if user.pw_dir not in ("", "/"))
    except ImportError:  # pragma: no cover - not POSIX
        pass
    if resolved in {home.resolve() for home in homes}:
        return "a home directory"
    working = Path.cwd().resolve()
    if resolved == working:
        return "the working directory"
    if resolved in working.parents:
        return f"a parent of the working directory ({working})"
    return ""


def _remove_contents(directory: Path) -> None:
    """Everything in `directory` but its lock, which this process holds."""
    import shutil

    if not directory.is_dir():
        return
    refuse_forced_removal(directory)  # again, now that the lock keeps other processes out
    for entry in directory.iterdir():
        if entry.name == LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_new_entries(directory: Path, before: Set[str]) -> None:
    """Remove what was added to `directory` since it held the entries `before` (its lock aside)."""
    import shutil

    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        if entry.name in before or entry.name == LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def remove_if_empty(directory: Path) -> None:
    """Remove `directory` if it holds nothing but an unlocked lock file (a run directory this
    command created and then left empty); one that another process has locked meanwhile stays."""
    from ipuflow.storage.run_lock import LockFileIsALink, RunDirectoryLocked

    if not directory.is_dir() or any(entry.name != LOCK_NAME for entry in directory.iterdir()):
        return
    lock = RunDirectoryLock(directory)
    try:
        lock.acquire()  # held while the file goes, so that no other process takes it in between
    except (RunDirectoryLocked, LockFileIsALink, OSError):
        return
    try:
        lock.path.unlink(missing_ok=True)
        directory.rmdir()
    except OSError:
        pass  # something appeared in it meanwhile: it stays
    finally:
        lock.release()


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
    if key in ("trainer.max_steps", "trainer.patience"):
        if new is _DEFAULT or new is None:
            return True  # no limit
        return old is not _DEFAULT and old is not None and isinstance(new, int) and isinstance(old, int) and new > old
    if old is _DEFAULT:
        import inspect

        from ipuflow.training.loop.gradient_descent_trainer import GradientDescentTrainer

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


def run_metadata(previous: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Versions of ipuflow, torch and Python, the command, the packages included
    (`--include-package`), and the git commit of the working directory if any.

    `include_packages` lets a later user of the archive learn which package its config may need.
    `previous` is the meta.json of the run this command resumes: its commands are kept, oldest first,
    as `earlier_commands`.
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
    if previous is not None:
        earlier = previous.get("earlier_commands")
        earlier = [command for command in earlier if isinstance(command, str)] if isinstance(earlier, list) else []
        if isinstance(previous.get("command"), str):
            earlier.append(previous["command"])
        meta["earlier_commands"] = earlier
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


_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_run_file(directory: Path, level: int, message: str) -> None:
    """Write one record to `directory`'s out.log only (the terminal has already been told, by the
    command's error paragraph); nothing if the run has no out.log."""
    path = directory / LOG_NAME
    if not path.is_file():
        return
    record = logging.getLogger("ipuflow.experiment.run").makeRecord("ipuflow.experiment.run", level, __file__, 0,
                                                                     message, (), None)
    handler = logging.FileHandler(path, mode="a")
    try:
        handler.setFormatter(logging.Formatter(_LOG_FORMAT))
        handler.handle(record)
    finally:
        handler.close()


def configure_logging(log_file: Optional[Path] = None, file_friendly: bool = False) -> None:
    """Log INFO to stderr (config values excepted) and everything at INFO to `log_file` if given."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        if getattr(handler, "_ipuflow", False):
            root.removeHandler(handler)
            handler.close()
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter(_LOG_FORMAT, "%H:%M:%S"))
    console.addFilter(_ConsoleFilter())
    console._ipuflow = True  # type: ignore[attr-defined]
    root.addHandler(console)
    if log_file is not None:
        to_file = logging.FileHandler(log_file, mode="a")
        to_file.setFormatter(logging.Formatter(_LOG_FORMAT))
        to_file._ipuflow = True  # type: ignore[attr-defined]
        root.addHandler(to_file)
    if file_friendly:
        from ipuflow.training.callbacks.progress import FILE_FRIENDLY_ENVIRONMENT_VARIABLE

        os.environ[FILE_FRIENDLY_ENVIRONMENT_VARIABLE] = "1"
