"""The requests callbacks make to the trainer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrainerControl:
    """Requests from callbacks; the trainer clears each one once it has acted on it.

    `should_stop` ends training (after validating, writing the metrics and a checkpoint, as at an
    epoch end); `should_epoch_stop` ends the current epoch early (the epoch end's validation,
    metrics, schedulers and checkpoint follow); `should_save` writes a checkpoint; `should_validate`
    runs a validation; `should_log` reads and logs the running metrics (`on_log`). A request made
    during a host call's events is honoured after that call; `should_log` made in `on_step_begin` is
    honoured by the same call. `should_training_stop` and `should_evaluate` are the Hugging Face
    names of `should_stop` and `should_validate`.
    """

    should_stop: bool = False
    should_save: bool = False
    should_validate: bool = False
    should_log: bool = False
    should_epoch_stop: bool = False

    @property
    def should_training_stop(self) -> bool:
        """Hugging Face's name for `should_stop`."""
        return self.should_stop

    @should_training_stop.setter
    def should_training_stop(self, value: bool) -> None:
        self.should_stop = value

    @property
    def should_evaluate(self) -> bool:
        """Hugging Face's name for `should_validate`."""
        return self.should_validate

    @should_evaluate.setter
    def should_evaluate(self, value: bool) -> None:
        self.should_validate = value
