"""The trainer callback that reports each validation to an optuna trial and stops pruned trials."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ipuflow.training.callbacks.callback import TrainerCallback
from ipuflow.training.events.event import TrainerEvent
from ipuflow.training.state.metric_tracker import parse_validation_metric

logger = logging.getLogger(__name__)

PRUNED_AT_ATTRIBUTE = "pruned_at_step"
"""The trial user attribute the callback sets when the pruner stops the trial."""


def tuned_value(metric: Union[str, List[str]], metrics: Dict[str, float]) -> float:
    """The value a study optimises for `metric`: the metric itself for one name (so that accuracy reads
    as accuracy), the signed sum for a list (maximised, as the trainer's MetricTracker does)."""
    tracked = parse_validation_metric(metric)
    try:
        if len(tracked) == 1:
            return float(metrics[tracked[0][1]])
        return sum(sign * float(metrics[name]) for sign, name in tracked)
    except KeyError as error:
        from ipuflow.config import ConfigurationError

        raise ConfigurationError(
            f"tune: the search's metric uses {error.args[0]!r}, but validation produced only {sorted(metrics)}."
        ) from None


@TrainerCallback.register("optuna_pruning")
class OptunaPruningCallback(TrainerCallback):
    """Reports `metric` after every validation (at its count of optimizer updates) to trial
    `trial_number` of optuna study `study_name` in `storage`, and asks the trainer to stop (after a
    checkpoint, so the run stays a normal run) when `pruner` (a SEARCH pruner block: optuna does not
    store pruners with studies) prunes the trial. `ipuflow tune` adds it to each trial's config.

    The callback is active only while the trial is running in that storage: re-running or recovering a
    trial's directory with `ipuflow train` later trains as usual and reports nothing.
    """

    def __init__(self, serialization_dir: str, storage: str, study_name: str, trial_number: int,
                 metric: Union[str, List[str]] = "-loss", pruner: Optional[Dict[str, Any]] = None) -> None:
        """The trial to report to and how.

        storage: the optuna storage URL of the study (ipuflow tune: sqlite:///DIR/study.db).
        study_name: the study's name in the storage.
        trial_number: the trial this run is.
        metric: the validation metric to report, signed like trainer.validation_metric.
        pruner: the SEARCH's pruner block, e.g. {"type": "median", "n_warmup_steps": 1}.
        """
        super().__init__(serialization_dir)
        parse_validation_metric(metric, key="metric")  # a bad metric is an error now, not after the first epoch
        self.storage_url = storage
        self.study_name = study_name
        self.trial_number = trial_number
        self.metric = metric
        self.pruner = dict(pruner or {"type": "median"})
        self._trial: Any = None

    def on_train_begin(self, event: TrainerEvent) -> None:
        self._trial = self._running_trial()
        if self._trial is not None:
            event.state.trial_name = f"{self.study_name}-{self.trial_number}"
            event.state.trial_params = dict(self._trial.params)

    def _running_trial(self) -> Optional[Any]:
        prefix = "sqlite:///"
        if self.storage_url.startswith(prefix) and not Path(self.storage_url[len(prefix):]).is_file():
            logger.info("optuna_pruning: the study storage %s is gone; not reporting.", self.storage_url)
            return None
        import optuna

        storage = optuna.storages.RDBStorage(self.storage_url)
        try:
            study_id = storage.get_study_id_from_name(self.study_name)
            trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, self.trial_number)
        except KeyError:
            logger.info("optuna_pruning: no trial %d in study %r; not reporting.", self.trial_number, self.study_name)
            return None
        if storage.get_trial(trial_id).state != optuna.trial.TrialState.RUNNING:
            logger.info("optuna_pruning: trial %d of study %r is finished; not reporting.", self.trial_number,
                        self.study_name)
            return None
        from ipuflow.tuning.study import build_pruner

        study = optuna.load_study(study_name=self.study_name, storage=storage, pruner=build_pruner(self.pruner))
        return optuna.trial.Trial(study, trial_id)

    def on_evaluate(self, event: TrainerEvent) -> None:
        if self._trial is None:
            return
        assert event.metrics is not None
        step = event.state.global_step
        value = tuned_value(self.metric, event.metrics)
        self._trial.report(value, step)
        if self._trial.should_prune():
            logger.info("optuna_pruning: trial %d pruned after %d optimizer updates (%s = %s).", self.trial_number,
                        step, self.metric, value)
            self._trial.set_user_attr(PRUNED_AT_ATTRIBUTE, step)
            event.control.should_stop = True
            self._trial = None  # report nothing more
