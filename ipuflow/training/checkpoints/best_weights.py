"""``best.safetensors``: writing the best weights, checking them against the checksum the
`TrainerState` records, repairing them on resume, and loading them into the model at the end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Tuple

from ipuflow.distributed.collectives import barrier
from ipuflow.execution.executor import StepExecutor
from ipuflow.models.model import Model
from ipuflow.storage import file_sha256, link_atomically
from ipuflow.training.checkpoints.checkpointer import BEST_WEIGHTS_NAME, load_weights, save_weights
from ipuflow.training.optim.moving_average import MovingAverage
from ipuflow.training.state.trainer_state import TrainerState, is_primary

logger = logging.getLogger(__name__)


class BestWeights:
    """The best weights file of a run. Where they were recorded (`best_position`: epochs, host calls)
    and the file's SHA-256 once written (`best_sha256`) live in the `TrainerState`, so they travel in
    checkpoints and a resume can check and repair the file."""

    def __init__(self, serialization_dir: str, model: Model, executor: StepExecutor,
                 moving_average: Optional[MovingAverage]) -> None:
        self.path = Path(serialization_dir) / BEST_WEIGHTS_NAME
        self._model = model
        self._executor = executor
        self._moving_average = moving_average

    def existing_path(self) -> Optional[str]:
        """The file, if it was written."""
        return str(self.path) if self.path.exists() else None

    @staticmethod
    def mark(state: TrainerState, epoch: int) -> None:
        """The current weights (of `epoch`) are the best: remember where (the file follows; see `write`)."""
        state.best_epoch = epoch
        state.best_position = [state.epochs_completed, state.batches_in_epoch_completed]
        state.best_sha256 = None

    def write(self, state: TrainerState, checkpoint_here: Optional[Path], checkpoint_sha256: Optional[str] = None) -> None:
        """Write the file from the current weights (a hard link to `checkpoint_here`, the checkpoint
        just written at this very position, when it holds exactly them) and record its checksum
        (`checkpoint_sha256`, that checkpoint's, when given: the linked bytes are the same)."""
        linked = checkpoint_here is not None and self._moving_average is None
        if linked:
            if is_primary():
                link_atomically(checkpoint_here, self.path)  # type: ignore[arg-type]
        else:
            self._save()
        barrier()  # under torchrun rank 0 has written the file now, and every rank may read it
        state.best_sha256 = checkpoint_sha256 if linked and checkpoint_sha256 else file_sha256(self.path)
        state.best_model_checkpoint = str(self.path)

    def _save(self) -> None:
        self._executor.copy_weights_to_host()
        if self._moving_average is not None:
            self._moving_average.assign_average_value()
        try:
            weights = self._model.state_dict()  # every rank: a sharded (FSDP) model gathers its weights onto rank 0
            if is_primary():
                save_weights(weights, self.path)
        finally:
            if self._moving_average is not None:
                self._moving_average.restore()

    def repair(self, state: TrainerState, checkpoint_position: Tuple[int, int], checkpoint: Path) -> None:
        """Make the file hold the weights the restored state names as the best.

        When they were recorded at the checkpoint's own position (a crash may have come between the
        checkpoint and writing them) they are rebuilt from it; otherwise the file must match the
        checksum recorded when it was written, or it is the one a later validation wrote before the
        crash, which the resumed run writes again (the end of training checks it)."""
        if state.best_position is None:
            return
        if tuple(state.best_position) == checkpoint_position:
            before = file_sha256(self.path) if self.path.is_file() else None
            self.write(state, checkpoint)
            if before != state.best_sha256:
                logger.warning("%s did not hold the best weights recorded in the checkpoint (a crash before they "
                               "were written); rebuilt them from the checkpoint.", self.path)
        elif state.best_sha256 is not None and (not self.path.is_file() or file_sha256(self.path) != state.best_sha256):
            logger.info("%s differs from the best weights recorded in the checkpoint (epoch %s): it was written after "
                        "the checkpoint or damaged; the resumed run must write it again.", self.path, state.best_epoch)

    def load_into_model(self, state: TrainerState) -> None:
        """Leave the model (host and device) holding the best weights: the file's, checked against
        its checksum; without a file, the moving average's (if any) or the current ones. When they were
        recorded at the state's own position no update has been made since: the model holds them already."""
        here = [state.epochs_completed, state.batches_in_epoch_completed]
        if self._moving_average is None and state.best_position is not None and list(state.best_position) == here:
            return
        best = self.existing_path()
        if best is not None and state.best_sha256 is not None and file_sha256(best) != state.best_sha256:
            raise RuntimeError(
                f"{best} does not hold the best weights this run recorded (epoch {state.best_epoch}): its bytes "
                "differ from the checksum taken when they were written, and they cannot be rebuilt from the latest "
                "checkpoint. Restore the file from a backup, or start the run over with --force."
            )
        if best is not None:
            self._model.load_state_dict(load_weights(best))
            self._executor.copy_weights_to_device()
        elif self._moving_average is not None:
            self._executor.copy_weights_to_host()
            self._moving_average.assign_average_value()
            self._executor.copy_weights_to_device()
