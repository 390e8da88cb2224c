"""The `epoch_log` callback: one JSON line of metrics per epoch in the run directory."""

import json
import os
from typing import Any, Dict

from ipuflow.training.callbacks import TrainerCallback
from ipuflow.training.events import TrainerEvent


@TrainerCallback.register("epoch_log")
class EpochLogCallback(TrainerCallback):
    """Appends `{"epoch": ..., <metrics>}` to `<serialization_dir>/<file_name>` after every epoch."""

    def __init__(self, serialization_dir: str, file_name: str = "epoch_log.jsonl") -> None:
        super().__init__(serialization_dir)  # injected by the trainer
        self.path = os.path.join(serialization_dir, file_name)
        self.epochs_logged = 0

    def on_epoch_end(self, event: TrainerEvent) -> None:
        """Append the epoch's numeric metrics (`event.metrics`) as one JSON line."""
        if self.is_primary:
            numbers = {key: value for key, value in (event.metrics or {}).items() if isinstance(value, (int, float))}
            with open(self.path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"epoch": event.epoch, **numbers}) + "\n")
            self.epochs_logged += 1

    def state_dict(self) -> Dict[str, Any]:
        """How many epochs were logged (checkpointed, so a resumed run keeps counting)."""
        return {"epochs_logged": self.epochs_logged}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the count from a checkpoint."""
        self.epochs_logged = state_dict.get("epochs_logged", 0)
