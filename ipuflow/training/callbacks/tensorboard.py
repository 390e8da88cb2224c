"""TensorBoard event files: ``log/train`` (running loss, learning rate, epoch metrics) and
``log/validation`` (validation metrics)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


@TrainerCallback.register("tensorboard")
class TensorBoardCallback(TrainerCallback):
    """Writes scalars with `torch.utils.tensorboard.SummaryWriter`.

    Training writer (``log/train``): every logging point, ``batch/<name>`` for the running metrics
    (``loss``, ``batch_loss``, ``lr``...) at the optimizer-update step, and after every epoch
    ``epoch/<name>`` for its ``training_*`` metrics at step ``epoch`` (the epoch's number, from 0, as
    in metrics.json). Validation writer
    (``log/validation``): ``epoch/<name>`` per epoch, and ``update/<name>`` for every validation at
    its optimizer-update step (the ones from `validation_interval` included). Writers open on the
    first event, so building the callback costs nothing.

    flush_secs: seconds between flushes of the event files to disk.
    """

    def __init__(self, serialization_dir: str, flush_secs: int = 120) -> None:
        super().__init__(serialization_dir)
        self._flush_secs = flush_secs
        self._writers: Dict[str, "SummaryWriter"] = {}

    def writer(self, name: str) -> "SummaryWriter":
        """The writer for ``log/<name>``, opened on first use."""
        if name not in self._writers:
            from torch.utils.tensorboard import SummaryWriter

            self._writers[name] = SummaryWriter(
                os.path.join(self.serialization_dir, "log", name), flush_secs=self._flush_secs
            )
        return self._writers[name]

    def on_log(self, event: TrainerEvent) -> None:
        if not event.is_primary or event.logs is None:
            return
        writer = self.writer("train")
        for name, value in event.logs.items():
            if isinstance(value, (int, float)):
                writer.add_scalar(f"batch/{name}", value, event.state.global_step)

    def on_evaluate(self, event: TrainerEvent) -> None:
        if not event.is_primary or event.metrics is None:
            return
        writer = self.writer("validation")
        for name, value in event.metrics.items():
            if isinstance(value, (int, float)):
                writer.add_scalar(f"update/{name}", value, event.state.global_step)

    def on_epoch_end(self, event: TrainerEvent) -> None:
        if not event.is_primary or event.metrics is None or event.epoch is None:
            return
        metrics, epoch = event.metrics, event.epoch
        for prefix, writer_name in (("training_", "train"), ("validation_", "validation")):
            for key, value in metrics.items():
                if key.startswith(prefix) and key != "training_duration" and isinstance(value, (int, float)):
                    # At the epoch's number, from 0, as metrics_epoch_N.json and metrics.json number it.
                    self.writer(writer_name).add_scalar(f"epoch/{key[len(prefix):]}", value, epoch)
        for writer in self._writers.values():
            writer.flush()

    def on_train_end(self, event: TrainerEvent) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
