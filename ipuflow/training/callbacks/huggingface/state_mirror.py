"""A `transformers.TrainerState` kept in step with ipuflow's `TrainerState`, with Hugging Face's names
in its log history and Hugging Face's rule for `best_metric`."""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Mapping, Optional

from ipuflow.training.state.trainer_state import TrainerState

# ipuflow's log keys whose Hugging Face names differ.
_LOG_NAMES = {"lr": "learning_rate"}
_VALIDATION_PREFIX = "validation_"


def hugging_face_logs(logs: Mapping[str, Any]) -> Dict[str, Any]:
    """A training log (`loss`, `batch_loss`, `lr`...) under the Trainer's names (`learning_rate`)."""
    return {_LOG_NAMES.get(key, key): value for key, value in logs.items()}


def hugging_face_metrics(metrics: Mapping[str, Any], prefix: str) -> Dict[str, Any]:
    """Validation or test metrics as the Trainer names them (`eval_accuracy`, `test_loss`)."""
    return {f"{prefix}_{key}": value for key, value in metrics.items()}


def _history_entry(entry: Mapping[str, Any]) -> Dict[str, Any]:
    if any(key.startswith(_VALIDATION_PREFIX) for key in entry):
        return {(f"eval_{key[len(_VALIDATION_PREFIX):]}" if key.startswith(_VALIDATION_PREFIX) else key): value
                for key, value in entry.items()}
    return hugging_face_logs(entry)


class HuggingFaceStateMirror:
    """Holds one `transformers.TrainerState` and refreshes it from ipuflow's before each call.

    `best_metric` and `best_global_step` follow the Trainer: they are updated after `on_evaluate`
    (so a callback there compares the new metrics with the best before them), for
    `args.metric_for_best_model` with `args.greater_is_better`, which may differ from ipuflow's
    `validation_metric`.
    """

    def __init__(self) -> None:
        from transformers import TrainerState as HuggingFaceTrainerState

        self.state = HuggingFaceTrainerState()
        self._history_source: Optional[List[Dict[str, Any]]] = None

    def refresh(self, state: TrainerState) -> Any:
        """The mirrored state, updated from `state`."""
        mirrored = self.state
        mirrored.epoch = state.epoch
        mirrored.global_step = state.global_step
        mirrored.max_steps = state.max_steps if state.max_steps is not None else 0
        mirrored.num_train_epochs = state.num_train_epochs
        if state.logging_steps:
            mirrored.logging_steps = state.logging_steps
        if state.eval_steps:
            mirrored.eval_steps = state.eval_steps
        mirrored.train_batch_size = state.train_batch_size
        mirrored.num_input_tokens_seen, mirrored.total_flos = state.num_input_tokens_seen, state.total_flos
        mirrored.best_model_checkpoint = state.best_model_checkpoint
        mirrored.trial_name = state.trial_name
        mirrored.trial_params = state.trial_params
        mirrored.is_hyper_param_search = state.trial_name is not None
        mirrored.is_world_process_zero = state.is_world_process_zero
        mirrored.is_local_process_zero = state.is_local_process_zero
        self._mirror_history(state.log_history)
        return mirrored

    def _mirror_history(self, history: List[Dict[str, Any]]) -> None:
        """Convert only the entries added since the last call (the list is replaced on resume)."""
        mirrored = self.state.log_history
        if history is not self._history_source or len(mirrored) > len(history):
            mirrored.clear()
            self._history_source = history
        mirrored.extend(_history_entry(entry) for entry in history[len(mirrored):])

    def record_evaluation(self, metrics: Mapping[str, Any], args: Any) -> None:
        """After `on_evaluate`: the Trainer's `_determine_best_metric` for the Hugging Face-named `metrics`."""
        name = args.metric_for_best_model
        if name is None:
            return
        key = name if name.startswith("eval_") else f"eval_{name}"
        value = metrics.get(key)
        if not isinstance(value, (int, float)):
            return
        better = operator.gt if args.greater_is_better else operator.lt
        if self.state.best_metric is None or better(value, self.state.best_metric):
            self.state.best_metric = float(value)
            self.state.best_global_step = self.state.global_step

    def state_dict(self) -> Dict[str, Any]:
        """What must survive a resume: Hugging Face's best-metric bookkeeping."""
        # Recent TrainerStates have best_global_step; in older ones (4.29) only this mirror sets it.
        return {"best_metric": self.state.best_metric, "best_global_step": getattr(self.state, "best_global_step", None)}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self.state.best_metric = state_dict.get("best_metric")
        self.state.best_global_step = state_dict.get("best_global_step")
