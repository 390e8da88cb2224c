"""The registrable `Trainer` base."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Iterator, Optional


from ipuflow.config import Registrable
from ipuflow.training.checkpoints.checkpointer import TrainerCheckpoint
from ipuflow.training.state.run_status import RunStatus

if TYPE_CHECKING:
    from ipuflow.data.loader import DataLoader
    from ipuflow.evaluation.example_scoring import ExampleScoring
    from ipuflow.execution.executor import StepExecutor
    from ipuflow.models.model import Model


class Trainer(Registrable):
    """Trains a model and returns its final metrics; `gradient_descent` is the default."""

    default_implementation: ClassVar[Optional[str]] = "gradient_descent"

    # What the experiment uses after training (test evaluation through the trainer's executor) and
    # what --dry-run reports; every trainer provides them.
    model: "Model"
    executor: "StepExecutor"
    data_loader: "DataLoader"

    def __init__(self, serialization_dir: Optional[str] = None) -> None:
        self.serialization_dir = serialization_dir

    def train(self) -> Dict[str, Any]:
        """Train, and return the metrics (with the best weights loaded into the model)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def get_checkpoint_state(self) -> Iterator[Optional[TrainerCheckpoint]]:
        """The model and training state to save, valid while the context is held (a moving
        average or a device copy may be swapped in for that time); None when nothing is saved."""
        yield None

    def evaluate_test_set(self, executor: "StepExecutor", loader: Any,
                          examples: Optional["ExampleScoring"] = None) -> Dict[str, float]:
        """The model's metrics on a test loader, with an inference `executor` compiled for it; with
        `examples`, its postprocessor's metrics as well."""
        from ipuflow.evaluation.example_scoring import evaluate_examples

        return evaluate_examples(self.model, executor, loader, examples)

    def get_best_weights_path(self) -> Optional[str]:
        """The file holding the best weights so far, if any."""
        return None

    def get_best_weights_sha256(self) -> Optional[str]:
        """The SHA-256 of the best-weights file recorded when it was written, if known."""
        return None

    @property
    def run_status(self) -> RunStatus:
        """Where the run stands; a trainer that keeps no status is always at the start."""
        return RunStatus()

    def record_run_status(self, status: RunStatus) -> None:
        """Record `status` (test set evaluated, archived) where a resumed run finds it; by default nowhere."""
