"""The serialization directory: the rules for creating, reusing and recovering it, and its records."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuflow.config import ConfigurationError, Params
from ipuflow.version import VERSION

CONFIG_NAME = "config.json"
META_NAME = "meta.json"
LOG_NAME = "out.log"
METRICS_NAME = "metrics.json"
VOCABULARY_DIR = "vocabulary"
BEST_WEIGHTS_NAME = "best.safetensors"
ARCHIVE_NAME = "model.tar.gz"


def prepare_serialization_dir(directory: Path, params: Params, recover: bool, force: bool) -> None:
    """Create `directory` for a new run, or check it can be recovered; nothing on disk is lost.

    A non-empty directory needs `recover` (continue the run, with the same config) or `force`
    (start over: the old contents are removed).
    """
    if recover and force:
        raise ConfigurationError("--recover and --force cannot be used together: --recover continues the run in "
                                 f"{directory}, --force deletes it and starts over.")
    has_contents = directory.is_dir() and any(directory.iterdir())
    if recover:
        saved = directory / CONFIG_NAME
        if not saved.is_file():
            raise ConfigurationError(
                f"--recover: {directory} holds no {CONFIG_NAME}, so there is no run to recover. Drop --recover "
                f"to start a new run there."
            )
        differences = config_differences(Params(json.loads(saved.read_text())), params)
        if differences:
            raise ConfigurationError(
                f"--recover: the config differs from the one the run in {directory} started with, at: "
                f"{'; '.join(differences)}. Recover with the same config, or start a new run in another directory."
            )
        return
    if has_contents:
        if not force:
            raise ConfigurationError(
                f"Serialization directory {directory} already exists and is not empty. Use --recover to continue "
                f"the run in it, --force to delete it and start over, or choose another directory."
            )
        _remove_tree(directory)
    directory.mkdir(parents=True, exist_ok=True)


def _remove_tree(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory)


def config_differences(saved: Params, current: Params) -> List[str]:
    """Key paths whose values differ between two configs, each as 'key: saved → current'."""
    old, new = saved.as_flat_dict(), current.as_flat_dict()
    differences = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            differences.append(f"{key} (removed; was {json.dumps(old[key])})")
        elif key not in old:
            differences.append(f"{key} (added: {json.dumps(new[key])})")
        elif old[key] != new[key]:
            differences.append(f"{key}: {json.dumps(old[key])} → {json.dumps(new[key])}")
    return differences


def run_metadata() -> Dict[str, Any]:
    """Versions of ipuflow, torch and Python, the packages included (`--include-package`), and the
    git commit of the working directory if any.

    `include_packages` lets a later user of the archive learn which package its config may need.
    """
    import torch

    from ipuflow.config.plugins import included_packages

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
