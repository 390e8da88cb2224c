"""The trainer's callback interface and the control object callbacks use to steer training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

from ipuflow.config import Registrable

if TYPE_CHECKING:
    from pathlib import Path

    from ipuflow.training.gradient_descent_trainer import GradientDescentTrainer


@dataclass
class TrainerControl:
    """Requests from callbacks, honoured by the trainer after the current host call.

    `should_stop` ends training after writing a checkpoint; `should_save` writes a checkpoint;
    `should_validate` runs validation. The trainer clears a request once it has acted on it.
    """

    should_stop: bool = False
    should_save: bool = False
    should_validate: bool = False


class TrainerCallback(Registrable):
    """Hooks into the training loop; every hook takes ``**kwargs`` for forward compatibility.

    Order: `on_start` (also when resuming) → per host call `on_batch` (``is_training=True``), with
    `on_log` at logging points → per validation `on_batch` (``is_training=False``) per batch, then
    `on_evaluate` → per epoch `on_epoch` → `on_save` after each checkpoint → `on_end` always, also
    after an error (then with ``metrics=None``). `serialization_dir` is injected. `state_dict` is
    saved in checkpoints and handed back to `load_state_dict` by list position on resume.
    """

    def __init__(self, serialization_dir: str) -> None:
        self.serialization_dir = serialization_dir
        self.trainer: Optional["GradientDescentTrainer"] = None

    def on_start(self, trainer: "GradientDescentTrainer", is_primary: bool = True, **kwargs: Any) -> None:
        """Before the first host call of `train()`."""
        self.trainer = trainer

    def on_batch(
        self,
        trainer: "GradientDescentTrainer",
        batch: Mapping[str, Any],
        outputs: Mapping[str, Any],
        batch_metrics: Optional[Dict[str, float]],
        epoch: int,
        batch_number: int,
        is_training: bool,
        is_primary: bool = True,
        **kwargs: Any,
    ) -> None:
        """After each training host call and each validation batch (`batch_number` is 1-based).

        `outputs` stay on the device. `batch_metrics` is the dict just read at a logging point
        (None otherwise, so that no callback forces a device sync on every call).
        """

    def on_log(
        self,
        trainer: "GradientDescentTrainer",
        logs: Dict[str, float],
        step: int,
        is_training: bool = True,
        **kwargs: Any,
    ) -> None:
        """At logging points: running training metrics (loss, batch_loss, lr) at optimizer update `step`."""

    def on_evaluate(
        self, trainer: "GradientDescentTrainer", metrics: Dict[str, float], epoch: int, step: int, **kwargs: Any
    ) -> None:
        """After each validation (epoch ends and `validation_interval`), with its metrics."""

    def on_epoch(
        self,
        trainer: "GradientDescentTrainer",
        metrics: Dict[str, Any],
        epoch: int,
        is_primary: bool = True,
        **kwargs: Any,
    ) -> None:
        """After each epoch's metrics file is written and its schedulers stepped."""

    def on_save(self, trainer: "GradientDescentTrainer", paths: Tuple["Path", "Path"], **kwargs: Any) -> None:
        """After a checkpoint is written, with its (model, training state) paths."""

    def on_end(
        self,
        trainer: "GradientDescentTrainer",
        metrics: Optional[Dict[str, Any]] = None,
        epoch: Optional[int] = None,
        is_primary: bool = True,
        **kwargs: Any,
    ) -> None:
        """Once, at the end of `train()`, also after an error (then `metrics` is None)."""

    def state_dict(self) -> Dict[str, Any]:
        """State to checkpoint (plain values)."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
