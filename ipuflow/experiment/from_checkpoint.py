"""`ipuflow train -r --from-checkpoint PATH` (IPUTrainer's `resume_from_checkpoint=PATH`): resume from a
chosen checkpoint instead of the newest. What the run wrote after that point is moved, not deleted,
into ``DIR/superseded_<N>/``, so that the resumed run writes its own and nothing on disk is lost."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import List, Tuple

from ipuflow.config import ConfigurationError

logger = logging.getLogger(__name__)

_POSITION = re.compile(r"e(\d+)_b(\d+)")
# Files that describe the run as of its newest point (rewritten by the resumed run).
_RUN_FILES = ("metrics.json", "model.tar.gz", "trainer_state.json")


def _position(path: str) -> Tuple[int, int]:
    found = _POSITION.findall(Path(path).name)
    if not found:
        raise ConfigurationError(
            f"--from-checkpoint {path}: expected a checkpoint of the run, named by its position "
            "(model_state_eE_bB.safetensors, training_state_eE_bB.pt or checkpoint_eE_bB.json; eE_bB alone works too)."
        )
    epochs, batches = found[-1]
    return int(epochs), int(batches)


def _superseded_dir(directory: Path) -> Path:
    number = 1
    while (directory / f"superseded_{number}").exists():
        number += 1
    return directory / f"superseded_{number}"


def rewind_to_checkpoint(directory: Path, path: str) -> List[str]:
    """Make the checkpoint `path` names the newest in `directory`: every later checkpoint, the later
    epochs' metrics files, the run's final files and best weights that are not that checkpoint's are
    moved into ``superseded_<N>/``. Returns what was moved. A `ConfigurationError` (nothing moved) if
    `path` is not a readable checkpoint of the run, or its best weights are no longer on disk."""
    from ipuflow.storage import file_sha256
    from ipuflow.training.checkpoints.checkpointer import Checkpointer, load_training_state

    checkpointer = Checkpointer(str(directory))
    position = _position(path)
    available = checkpointer.all_checkpoints()
    if position not in available:
        names = ", ".join(f"e{e}_b{b}" for e, b in available) or "none"
        raise ConfigurationError(f"--from-checkpoint {path}: {directory} holds no checkpoint e{position[0]}_b{position[1]} "
                                 f"(its checkpoints, newest first: {names}).")
    try:
        checkpointer.verify_checkpoint(*position)
        state = load_training_state(checkpointer.paths(*position)[1]).get("trainer_state") or {}
    except Exception as error:  # noqa: BLE001 - any damage: name the file, change nothing
        raise ConfigurationError(f"--from-checkpoint {path}: the checkpoint cannot be used ({type(error).__name__}: "
                                 f"{error}); nothing was changed.") from None
    best = directory / "best.safetensors"
    best_position, best_sha = state.get("best_position"), state.get("best_sha256")
    best_is_theirs = best.is_file() and best_sha is not None and file_sha256(best) == best_sha
    if best_position is not None and tuple(best_position) != position and not best_is_theirs:
        raise ConfigurationError(
            f"--from-checkpoint {path}: the best weights as of that checkpoint (epoch {state.get('best_epoch')}) are "
            f"no longer on disk ({best.name} was written later and the checkpoint that held them was pruned), so the "
            "run could not end with the right best weights. Choose a later checkpoint; nothing was changed.")
    later = [p for p in available if p > position]
    moving = [file for e, b in later for file in (*checkpointer.paths(e, b), checkpointer.manifest_path(e, b))]
    moving += [file for file in sorted(directory.glob("metrics_epoch_*.json"))
               if file.stem.rsplit("_", 1)[-1].isdigit() and int(file.stem.rsplit("_", 1)[-1]) >= position[0]]
    moving += [directory / name for name in _RUN_FILES]
    if best.is_file() and not best_is_theirs:
        moving.append(best)
    moving = [file for file in moving if file.exists()]
    if not moving:
        return []
    target = _superseded_dir(directory)
    target.mkdir()
    for file in moving:
        shutil.move(str(file), str(target / file.name))
    moved = [file.name for file in moving]
    logger.info("Resuming from checkpoint e%d_b%d: moved what the run wrote after it into %s: %s",
                position[0], position[1], target, ", ".join(moved))
    return moved
