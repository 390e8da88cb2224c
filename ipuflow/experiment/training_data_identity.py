"""What the training data was when a run started, so that `-r` can say when it changed since.

A resumed run continues mid-epoch at a batch position in the data it started with; if the file has
changed meanwhile, that position points at other examples and the result silently differs from an
uninterrupted run. The identity is the data cache's (size and a hash of the file's head and tail),
without the modification time: touching a file changes nothing that matters.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ipuflow.config import Params
from ipuflow.data.columnar.cache import file_identity
from ipuflow.storage import write_json_atomically

logger = logging.getLogger(__name__)

IDENTITY_NAME = "training_data.json"


def _identities(params: Params) -> Dict[str, Any]:
    identities: Dict[str, Any] = {}
    paths = {"train_data_path": params.get("train_data_path")}
    validation = params.get("validation_data_path")
    # Several validation sets: each file is recorded under validation_data_path.<name>.
    paths.update({f"validation_data_path.{name}": path for name, path in validation.items()} if isinstance(
        validation, Mapping) else {"validation_data_path": validation})
    for key, value in paths.items():
        if isinstance(value, str) and Path(value).expanduser().is_file():
            identity = file_identity(Path(value).expanduser())
            identity.pop("mtime_ns", None)
            identities[key] = {"path": value, **identity}
    return identities


def record_training_data(directory: Path, params: Params) -> None:
    """Write the identity of the run's data files (those that are files) into the run directory."""
    write_json_atomically(directory / IDENTITY_NAME, _identities(params))


def warn_if_training_data_changed(directory: Path, params: Params) -> Optional[str]:
    """On resume: a warning (logged, and returned) naming each data file that differs from the one
    the run started with; None when they agree or the run recorded nothing."""
    try:
        recorded = json.loads((directory / IDENTITY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict):
        return None
    now = _identities(params)
    changed = []
    for key, before in recorded.items():
        after = now.get(key)
        if not isinstance(before, dict) or after is None:
            continue
        if before.get("size") != after.get("size") or before.get("head_tail_sha256") != after.get("head_tail_sha256"):
            changed.append(f"{key} {after['path']} ({before.get('size'):,} bytes then, {after['size']:,} now"
                           f"{'' if before.get('size') != after.get('size') else ', other content'})")
    if not changed:
        return None
    message = (f"The training data changed since the run in {directory} started: {'; '.join(changed)}. The resumed run "
               "continues at its saved position in the new data, so it will not equal an uninterrupted run; start a new "
               "run to train on the new data from the beginning.")
    logger.warning(message)
    return message
