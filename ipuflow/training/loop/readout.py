"""What a `GradientDescentTrainer` shows without changing anything: the `TrainerView` properties
callbacks read, its counters from before `state` held them, and the run's status and best weights
that the experiment reads."""

from __future__ import annotations

from typing import Dict, Optional

from ipuflow.data.loader import DataLoader
from ipuflow.training.checkpoints.best_weights import BestWeights
from ipuflow.training.loop.construction import loader_length
from ipuflow.training.loop.training_metrics import TrainingMetrics
from ipuflow.training.loop.validation import Validation, ValidationExamples
from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.state.run_status import RunStatus
from ipuflow.training.state.trainer_state import TrainerState


class TrainerReadout:
    """The read-only side of a `GradientDescentTrainer`, over the parts it keeps (declared here)."""

    state: TrainerState
    data_loader: DataLoader
    validation_data_loader: Optional[DataLoader]
    _metric_tracker: MetricTracker
    _metrics: TrainingMetrics
    _validation: Optional[Validation]
    _best: BestWeights
    _status: RunStatus

    @property
    def metric_tracker(self) -> MetricTracker:
        """The validation-score tracker."""
        return self._metric_tracker

    # The trainer's counters before `state` held them, read-only.
    epochs_completed = property(lambda self: self.state.epochs_completed, doc="`state.epochs_completed`.")
    batches_in_epoch_completed = property(lambda self: self.state.batches_in_epoch_completed,
                                          doc="`state.batches_in_epoch_completed` (host calls in the current epoch).")
    host_calls = property(lambda self: self.state.host_calls, doc="`state.host_calls`.")
    optimizer_updates = property(lambda self: self.state.global_step, doc="`state.global_step`.")
    samples_seen = property(lambda self: self.state.samples_seen, doc="`state.samples_seen`.")

    @property
    def num_batches_per_epoch(self) -> Optional[int]:
        """Host calls per training epoch (None if the loader has no length)."""
        return loader_length(self.data_loader)

    @property
    def validation_data_loaders(self) -> Dict[str, DataLoader]:
        """{set name: loader} of every validation set: ``{"": loader}`` for one set, {} without validation data."""
        return {} if self._validation is None else self._validation.sets

    @property
    def num_validation_batches(self) -> Optional[int]:
        """Host calls per validation, over every set (None without validation data or a length)."""
        lengths = [loader_length(loader) for loader in self.validation_data_loaders.values()]
        return None if not lengths or None in lengths else sum(lengths)  # type: ignore[arg-type]

    @property
    def computes_training_metrics(self) -> bool:
        """Whether the model's metrics are updated on training batches: only when the executor
        returns every micro-batch's outputs (``output_mode: "all"``)."""
        return self._metrics.covers_batch

    @property
    def validation_examples(self) -> Optional[ValidationExamples]:
        """How validations score examples through a postprocessor, if they do."""
        return None if self._validation is None else self._validation.examples

    def get_best_weights_path(self) -> Optional[str]:
        """The file holding the best weights so far, if one was written."""
        return self._best.existing_path()

    def get_best_weights_sha256(self) -> Optional[str]:
        """The SHA-256 of the best-weights file, recorded when it was written."""
        return self.state.best_sha256 if self._best.existing_path() is not None else None

    @property
    def run_status(self) -> RunStatus:
        """Where the run stands (as of the latest checkpoint or later)."""
        return self._status
