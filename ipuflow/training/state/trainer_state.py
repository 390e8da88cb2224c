"""The trainer's serializable state: its counters, the best weights' bookkeeping and the log, shaped
like the Hugging Face Trainer's `TrainerState` so that callbacks written for it read the same fields.

It is plain JSON (`to_dict`/`from_dict`), travels in every checkpoint's training state, and is written
as ``trainer_state.json`` into the serialization directory at every checkpoint and when training ends.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from ipuflow.distributed import is_primary as distributed_is_primary
from ipuflow.storage import write_json_atomically

TRAINER_STATE_NAME = "trainer_state.json"


_primary_check: Callable[[], bool] = distributed_is_primary


def is_primary() -> bool:
    """Whether this process is the one that writes files and logs (the rank-0 process of a
    distributed run); always True in a single-process run."""
    return _primary_check()


def set_primary_check(check: Optional[Callable[[], bool]]) -> None:
    """Install the function `is_primary` asks (tests pose as another rank); None restores the
    replica group's answer (rank 0, or always True in a single-process run)."""
    global _primary_check
    _primary_check = check if check is not None else distributed_is_primary


@dataclass
class TrainerState:
    """Where training stands. Hugging Face's fields first, then ipuflow's.

    `global_step` counts optimizer updates (a host call performs `device_iterations` of them);
    `epoch` is the epochs completed plus the fraction of the current epoch's host calls done;
    `max_steps` is the number of optimizer updates the run is planned to make (the trainer's
    `max_steps`, else `num_epochs` × updates per epoch; None when the loader has no length).
    `log_history` holds one dict per `on_log` (with `step` and `epoch`) and per validation
    (``validation_*`` metrics). `best_metric` is the best validation value of
    `trainer.validation_metric` (its signed sum for a list); `best_model_checkpoint` the file
    holding the best weights. `num_input_tokens_seen` counts the token-id fields' positions of every
    training row, padding included (Hugging Face's default, ``input_ids.numel()``), and `total_flos`
    is Hugging Face's estimate, 6 × tokens × the model's parameters outside embeddings.

    ipuflow's own: `host_calls`, `samples_seen`, `epochs_completed`, `batches_in_epoch_completed`
    (host calls done in the current epoch: the `_b{B}` of checkpoint names), `training_seconds`
    (summed over the processes of a resumed run, as of the last update), and where the best weights
    were recorded (`best_epoch`, `best_position` = [epochs, host calls], `best_sha256` of the file).
    """

    global_step: int = 0
    epoch: float = 0.0
    max_steps: Optional[int] = None
    num_train_epochs: int = 0
    log_history: List[Dict[str, Any]] = field(default_factory=list)
    best_metric: Optional[float] = None
    best_model_checkpoint: Optional[str] = None
    trial_name: Optional[str] = None
    trial_params: Optional[Dict[str, Any]] = None
    logging_steps: Optional[int] = None
    eval_steps: Optional[int] = None
    train_batch_size: Optional[int] = None
    num_input_tokens_seen: int = 0
    total_flos: float = 0.0
    host_calls: int = 0
    samples_seen: int = 0
    epochs_completed: int = 0
    batches_in_epoch_completed: int = 0
    training_seconds: float = 0.0
    best_epoch: Optional[int] = None
    best_position: Optional[List[int]] = None
    best_sha256: Optional[str] = None

    def configure(self, num_epochs: int, updates_per_epoch: Optional[int], max_steps: Optional[int],
                  log_interval: Optional[int], validation_interval: Optional[int],
                  train_batch_size: Optional[int]) -> "TrainerState":
        """Set the fields the trainer's configuration decides (also after a resume with raised limits)."""
        self.num_train_epochs = num_epochs
        limits = [limit for limit in (None if updates_per_epoch is None else updates_per_epoch * num_epochs, max_steps)
                  if limit is not None]
        self.max_steps = min(limits) if limits else None
        self.logging_steps, self.eval_steps, self.train_batch_size = log_interval, validation_interval, train_batch_size
        return self

    @property
    def is_world_process_zero(self) -> bool:
        """Hugging Face's name for `is_primary()`."""
        return is_primary()

    @property
    def is_local_process_zero(self) -> bool:
        """Hugging Face's name for the primary process of this machine (here: `is_primary()`)."""
        return is_primary()

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON values."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TrainerState":
        """The state `to_dict` wrote; an unknown key is an error (it would be silently lost)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"trainer state: unknown keys {unknown}; known: {sorted(known)}")
        return cls(**values)

    def save(self, path: Union[str, Path]) -> None:
        """Write the state as JSON, atomically."""
        write_json_atomically(path, self.to_dict())

    @classmethod
    def load(cls, path: Union[str, Path]) -> "TrainerState":
        """Read a state `save` wrote."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
