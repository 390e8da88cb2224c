"""Checkpoints of a training run: when to save, how to write files safely, which to keep, and
finding the latest loadable one.

A checkpoint is three files named by epochs and host calls ("batches") completed in the current
epoch: ``model_state_e{E}_b{B}.safetensors`` (the weights), ``training_state_e{E}_b{B}.pt``
(optimizer, schedulers, metric tracker, moving average, callbacks, counters and RNG states, plain
containers only, so ``torch.load(weights_only=True)`` reads it) and, written last,
``checkpoint_e{E}_b{B}.json``: the SHA-256 of the other two and the run's status (see
`RunStatus`). A checkpoint exists once its manifest does; files without one are the remains of a
write that was cut short. The end of epoch ``k`` is ``e{k+1}_b0``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, ClassVar, ContextManager, Dict, List, Optional, Protocol, Tuple, Union

import safetensors.torch
import torch

from ipuflow.config import Registrable, validators
from ipuflow.distributed import is_primary
from ipuflow.distributed.checkpoint_state import adopt_own_rank_state, with_rank_states
from ipuflow.distributed.rank_output import on_primary
from ipuflow.storage import file_sha256, verify_sha256, write_atomically, write_json_atomically

logger = logging.getLogger(__name__)

BEST_WEIGHTS_NAME = "best.safetensors"
"""The best weights so far, next to the checkpoints in the serialization directory (the archive's source)."""

_MANIFEST_RE = re.compile(r"^checkpoint_e(\d+)_b(\d+)\.json$")
_CHECKPOINT_FILE_RE = re.compile(r"^(model_state|training_state|checkpoint)_e(\d+)_b(\d+)\.(safetensors|pt|json)$")


class TrainerCheckpoint(Tuple[Dict[str, torch.Tensor], Dict[str, Any]]):
    """AllenNLP's pair ``(model_state, trainer_state)`` (it unpacks as two), with the checkpoint's
    `position` (epochs completed, host calls into the next epoch: what names its files) and the run's
    `run_status` (a `RunStatus` as a dict) as attributes. Without a position, the trainer state's
    ``epochs_completed`` and ``batches_in_epoch_completed`` give it, as in AllenNLP."""

    position: Tuple[int, int]
    run_status: Dict[str, Any]

    def __new__(cls, model_state: Dict[str, torch.Tensor], training_state: Dict[str, Any],
                position: Optional[Tuple[int, int]] = None,
                run_status: Optional[Dict[str, Any]] = None) -> "TrainerCheckpoint":
        checkpoint = super().__new__(cls, (model_state, training_state))  # type: ignore[type-var]
        if position is None:
            try:
                position = (int(training_state["epochs_completed"]), int(training_state["batches_in_epoch_completed"]))
            except (KeyError, TypeError, ValueError):
                raise ValueError("TrainerCheckpoint needs a position, or a trainer state with epochs_completed and "
                                 "batches_in_epoch_completed") from None
        checkpoint.position = (int(position[0]), int(position[1]))
        checkpoint.run_status = dict(run_status or {})
        return checkpoint

    @property
    def model_state(self) -> Dict[str, torch.Tensor]:
        """The model's weights."""
        return self[0]

    @property
    def training_state(self) -> Dict[str, Any]:
        """Everything else the trainer saves (AllenNLP calls it `trainer_state`)."""
        return self[1]

    trainer_state = training_state

    def _replace(self, **fields: Any) -> "TrainerCheckpoint":
        """A copy with some of `model_state`, `training_state`, `position`, `run_status` changed."""
        values = {"model_state": self.model_state, "training_state": self.training_state,
                  "position": self.position, "run_status": self.run_status, **fields}
        return TrainerCheckpoint(**values)

    def __repr__(self) -> str:
        return f"TrainerCheckpoint(position={self.position}, run_status={self.run_status})"


class CheckpointsUnreadable(RuntimeError):
    """Checkpoints exist but none of them can be read, so training cannot resume."""


def save_weights(state: Dict[str, torch.Tensor], path: Union[str, Path]) -> None:
    """Write a state dict as safetensors, atomically. Tied (shared) tensors are stored once each
    under every name, since safetensors refuses aliases."""
    seen: set = set()
    tensors: Dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if key in seen:
            tensor = tensor.clone()
        seen.add((tensor.untyped_storage().data_ptr(), tensor.storage_offset()))
        tensors[name] = tensor
    write_atomically(path, lambda temp: safetensors.torch.save_file(tensors, temp))


def save_training_state(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """`torch.save` plain containers and tensors, atomically."""
    write_atomically(path, lambda temp: torch.save(state, temp))


def load_weights(path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """Read a safetensors file onto the CPU."""
    return safetensors.torch.load_file(str(path), device="cpu")


def load_training_state(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a training-state file without unpickling code (``weights_only=True``)."""
    return torch.load(path, map_location="cpu", weights_only=True)


class CheckpointSource(Protocol):
    """What the checkpointer saves from: a trainer (AllenNLP's `Trainer.get_checkpoint_state`)."""

    def get_checkpoint_state(self) -> ContextManager[Optional[TrainerCheckpoint]]:
        """The model and training state to save, valid while the context is held; None: nothing to save."""


class Checkpointer(Registrable):
    """Saves checkpoints when asked and at the configured intervals, keeping the most recent ones.

    `serialization_dir` is injected. `save_every_num_batches` counts host calls within the current
    epoch; `save_every_num_seconds` counts wall time since the last save. Retention keeps the union
    of the `keep_most_recent_by_count` newest checkpoints and those written within
    `keep_most_recent_by_age` seconds; both None keeps everything, a count of 0 keeps none.
    """

    default_implementation: ClassVar[Optional[str]] = "default"

    def __init__(
        self,
        serialization_dir: str,
        save_completed_epochs: bool = True,
        save_every_num_seconds: Optional[float] = None,
        save_every_num_batches: Optional[int] = None,
        keep_most_recent_by_count: Optional[int] = 2,
        keep_most_recent_by_age: Optional[int] = None,
    ) -> None:
        validators.positive_number("save_every_num_seconds", save_every_num_seconds, optional=True)
        validators.positive_int("save_every_num_batches", save_every_num_batches, optional=True)
        validators.positive_number("keep_most_recent_by_age", keep_most_recent_by_age, optional=True)
        validators.non_negative_int("keep_most_recent_by_count", keep_most_recent_by_count, optional=True)
        self._serialization_dir = Path(serialization_dir)
        self._save_completed_epochs = save_completed_epochs
        self._save_every_num_seconds = save_every_num_seconds
        self._save_every_num_batches = save_every_num_batches
        self._keep_most_recent_by_count = keep_most_recent_by_count
        self._keep_most_recent_by_age = keep_most_recent_by_age
        self._last_save_time = time.time()
        self._last_save_epoch = 0
        self._last_save_batches = 0
        # Checkpoints found damaged on load: kept for inspection, but they hold no retention slot
        # (they sort newest, and would otherwise crowd out the resumed run's own checkpoints).
        self._damaged: set = set()
        self._written_sha256: Dict[Path, str] = {}

    @property
    def serialization_dir(self) -> Path:
        """Where the checkpoints live."""
        return self._serialization_dir

    @property
    def save_completed_epochs(self) -> bool:
        """Whether a checkpoint is written at every epoch end."""
        return self._save_completed_epochs

    @property
    def save_every_num_batches(self) -> Optional[int]:
        """Host calls between checkpoints within an epoch (None: none within an epoch)."""
        return self._save_every_num_batches

    def paths(self, epochs_completed: int, batches_in_epoch_completed: int) -> Tuple[Path, Path]:
        """The (model, training state) file paths of one checkpoint."""
        suffix = f"e{epochs_completed}_b{batches_in_epoch_completed}"
        return (
            self._serialization_dir / f"model_state_{suffix}.safetensors",
            self._serialization_dir / f"training_state_{suffix}.pt",
        )

    def manifest_path(self, epochs_completed: int, batches_in_epoch_completed: int) -> Path:
        """The path of one checkpoint's manifest (checksums and run status), written last."""
        return self._serialization_dir / f"checkpoint_e{epochs_completed}_b{batches_in_epoch_completed}.json"

    def should_save(self, epochs_completed: int, batches_in_epoch_completed: int) -> bool:
        """Whether the intervals ask for a checkpoint at this point."""
        if batches_in_epoch_completed == 0 and self._save_completed_epochs:
            return True
        interval = self._save_every_num_seconds
        if interval is not None and on_primary(lambda: time.time() - self._last_save_time >= interval):  # rank 0's clock decides
            return True
        if self._save_every_num_batches is not None:
            last = self._last_save_batches if self._last_save_epoch == epochs_completed else 0
            if batches_in_epoch_completed - last >= self._save_every_num_batches:
                return True
        return False

    def save_checkpoint(self, trainer: "CheckpointSource") -> Optional[Tuple[Path, Path]]:
        """Write the trainer's checkpoint state now, with the checkpointer's own state under
        ``checkpointer`` (restored by `load_checkpoint`), then apply retention; the paths written.
        Under torchrun every rank calls this together and rank 0 writes, adding each rank's own state."""
        primary = is_primary()
        if primary:
            self._serialization_dir.mkdir(parents=True, exist_ok=True)
        with trainer.get_checkpoint_state() as checkpoint:
            if checkpoint is None:
                return None
            epochs, batches = (int(count) for count in checkpoint.position)
            model_path, training_path = self.paths(epochs, batches)
            # The interval counters are recorded as of this save, so a resumed run keeps the cadence.
            self._last_save_time = time.time()
            self._last_save_epoch = epochs
            self._last_save_batches = batches
            training_state = with_rank_states({**checkpoint.training_state, "checkpointer": self.state_dict()})
            if not primary:
                return model_path, training_path
            save_training_state(training_state, training_path)
            save_weights(checkpoint.model_state, model_path)
            # The manifest goes last: a checkpoint is listed only once both files are complete.
            self._written_sha256 = {model_path: file_sha256(model_path), training_path: file_sha256(training_path)}
            self._write_manifest(epochs, batches, {path.name: digest for path, digest in self._written_sha256.items()},
                                 checkpoint.run_status)
        self._damaged.discard((epochs, batches))  # written anew
        self._remove_old_checkpoints()
        return model_path, training_path

    def written_sha256(self, path: Path) -> Optional[str]:
        """The SHA-256 recorded for `path` when this process last saved a checkpoint holding it, else None."""
        return self._written_sha256.get(Path(path))

    def _write_manifest(self, epochs: int, batches: int, checksums: Dict[str, str], run_status: Dict[str, Any]) -> None:
        write_json_atomically(self.manifest_path(epochs, batches), {"sha256": checksums, "run_status": run_status})

    def _read_manifest(self, epochs: int, batches: int) -> Dict[str, Any]:
        path = self.manifest_path(epochs, batches)
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(manifest, dict) or not isinstance(manifest.get("sha256"), dict):
                raise ValueError("expected an object with 'sha256'")
        except (OSError, ValueError) as error:
            raise ValueError(f"{path.name} cannot be read ({type(error).__name__}: {error})") from None
        return manifest

    def all_checkpoints(self) -> List[Tuple[int, int]]:
        """Checkpoints (their manifests written) as (epochs, batches), newest first."""
        if not self._serialization_dir.is_dir():
            return []
        found = []
        for entry in os.listdir(self._serialization_dir):
            match = _MANIFEST_RE.match(entry)
            if match:
                found.append((int(match.group(1)), int(match.group(2))))
        return sorted(found, reverse=True)

    def find_latest_checkpoint(self) -> Optional[Tuple[Path, Path]]:
        """The (model, training state) paths of the newest checkpoint, or None."""
        checkpoints = self.all_checkpoints()
        return self.paths(*checkpoints[0]) if checkpoints else None

    def verify_checkpoint(self, epochs: int, batches: int) -> Dict[str, Any]:
        """The manifest of one checkpoint after checking both files against its checksums; raises
        (naming the file) if a file is missing, or its bytes differ from those written."""
        manifest = self._read_manifest(epochs, batches)
        for path in self.paths(epochs, batches):
            expected = manifest["sha256"].get(path.name)
            if expected is None:
                raise ValueError(f"{self.manifest_path(epochs, batches).name} records no checksum for {path.name}")
            if not path.is_file():
                raise FileNotFoundError(f"{path.name} is missing")
            verify_sha256(path, expected)
        return manifest

    def load_checkpoint(self) -> Optional[TrainerCheckpoint]:
        """The newest checkpoint that verifies and loads; a damaged one (truncated, bytes changed,
        a file missing) is reported by name and the previous one tried. None if there is no
        checkpoint; `CheckpointsUnreadable` if there are some and none can be read. The interval
        counters continue from the checkpoint loaded."""
        failures = []
        for epochs, batches in self.all_checkpoints():
            model_path, training_path = self.paths(epochs, batches)
            try:
                manifest = self.verify_checkpoint(epochs, batches)
                checkpoint = TrainerCheckpoint(load_weights(model_path), load_training_state(training_path),
                                               (epochs, batches), dict(manifest.get("run_status") or {}))
            except Exception as error:  # damaged files: fall back to an older checkpoint
                failures.append(f"{self.manifest_path(epochs, batches).name} ({error})")
                self._damaged.add((epochs, batches))
                logger.warning(
                    "Checkpoint e%d_b%d in %s cannot be used: %s: %s; trying the previous one",
                    epochs, batches, self._serialization_dir, type(error).__name__, error,
                )
                continue
            checkpoint = checkpoint._replace(training_state=adopt_own_rank_state(checkpoint.training_state))
            if checkpoint.training_state.get("checkpointer") is not None:
                self.load_state_dict(checkpoint.training_state["checkpointer"])
            return checkpoint
        if failures:
            raise CheckpointsUnreadable(
                f"None of the {len(failures)} checkpoints in {self._serialization_dir} can be read, so training "
                f"cannot resume: {'; '.join(failures)}. No checkpoint was changed or removed. To start the run "
                f"over, run `ipuflow train` with --force instead of --recover (it deletes {self._serialization_dir}); "
                "or restore the files from a backup and recover again."
            )
        return None

    def latest_run_status(self) -> Optional[Dict[str, Any]]:
        """The run status recorded with the newest checkpoint whose files verify (None if none)."""
        for epochs, batches in self.all_checkpoints():
            try:
                return dict(self.verify_checkpoint(epochs, batches).get("run_status") or {})
            except Exception:  # damaged: load_checkpoint reports it when the run resumes
                continue
        return None

    def update_run_status(self, run_status: Dict[str, Any]) -> bool:
        """Record a new run status with the newest checkpoint (its manifest is rewritten, the
        checkpoint's files are not touched); False if there is no checkpoint to record it with."""
        checkpoints = self.all_checkpoints()
        if not checkpoints:
            return False
        if not is_primary():
            return True  # rank 0 records it
        manifest = self._read_manifest(*checkpoints[0])
        self._write_manifest(*checkpoints[0], manifest["sha256"], run_status)
        return True

    def remove_incomplete_checkpoints(self) -> List[str]:
        """Remove checkpoint files that have no manifest: a process killed while writing a
        checkpoint leaves them, and they are never loaded. The names removed."""
        if not self._serialization_dir.is_dir() or not is_primary():
            return []
        complete = set(self.all_checkpoints())
        removed = []
        for entry in sorted(os.listdir(self._serialization_dir)):
            match = _CHECKPOINT_FILE_RE.match(entry)
            if match and match.group(1) != "checkpoint" and (int(match.group(2)), int(match.group(3))) not in complete:
                (self._serialization_dir / entry).unlink(missing_ok=True)
                removed.append(entry)
        if removed:
            logger.info("Removed the files of a checkpoint whose writing was cut short: %s", ", ".join(removed))
        return removed

    def _remove_old_checkpoints(self) -> None:
        if self._keep_most_recent_by_count is None and self._keep_most_recent_by_age is None:
            return
        checkpoints = [checkpoint for checkpoint in self.all_checkpoints() if checkpoint not in self._damaged]
        keep = set()
        if self._keep_most_recent_by_count is not None:
            keep.update(checkpoints[: self._keep_most_recent_by_count])
        if self._keep_most_recent_by_age is not None:
            now = time.time()
            for checkpoint in checkpoints:
                newest = os.path.getmtime(self.manifest_path(*checkpoint))
                if now - newest <= self._keep_most_recent_by_age:
                    keep.add(checkpoint)
        for checkpoint in checkpoints:
            if checkpoint not in keep:
                # The manifest first: a checkpoint half removed is no longer listed.
                for path in (self.manifest_path(*checkpoint), *self.paths(*checkpoint)):
                    path.unlink(missing_ok=True)

    def state_dict(self) -> Dict[str, Any]:
        """Where the interval counters stand."""
        return {"last_save_epoch": self._last_save_epoch, "last_save_batches": self._last_save_batches}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the interval counters (the clock restarts now)."""
        self._last_save_epoch = state_dict["last_save_epoch"]
        self._last_save_batches = state_dict["last_save_batches"]
        self._last_save_time = time.time()


Checkpointer.register("default")(Checkpointer)
