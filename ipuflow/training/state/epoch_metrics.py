"""The metrics dict of an epoch (``metrics_epoch_N.json``, the `on_epoch_end` payload, `train()`'s
return value)."""

from __future__ import annotations

import datetime
from typing import Any, Dict, Optional

from ipuflow.training.state.metric_tracker import MetricTracker
from ipuflow.training.state.trainer_state import TrainerState


def best_metrics(state: TrainerState, tracker: MetricTracker) -> Dict[str, Any]:
    """``best_epoch`` and ``best_validation_*`` so far."""
    best: Dict[str, Any] = {} if state.best_epoch is None else {"best_epoch": state.best_epoch}
    best.update({f"best_validation_{key}": value for key, value in tracker.best_epoch_metrics.items()})
    return best


def epoch_metrics(epoch: int, training_seconds: float, epoch_seconds: float, training: Dict[str, float],
                  validation: Optional[Dict[str, float]], state: TrainerState, tracker: MetricTracker) -> Dict[str, Any]:
    """`epoch`, the durations, ``training_*``, ``validation_*``, the counters and the best so far."""
    return {
        "epoch": epoch,
        "training_duration": str(datetime.timedelta(seconds=training_seconds)),
        "epoch_duration": str(datetime.timedelta(seconds=epoch_seconds)),
        **{f"training_{key}": value for key, value in training.items()},
        **{f"validation_{key}": value for key, value in (validation or {}).items()},
        "host_calls": state.host_calls, "optimizer_updates": state.global_step, "samples_seen": state.samples_seen,
        **best_metrics(state, tracker),
    }
