"""Running a search: the optuna study in DIR's SQLite storage and one `ipuflow train` run per trial."""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.params import parse_overrides, with_overrides
from ipuflow.tuning.search_space import SearchSpec

logger = logging.getLogger(__name__)

STORAGE_NAME = "study.db"
SEARCH_NAME = "search.json"
TRIAL_RECORD_NAME = "tune_trial.json"
DEFAULT_STUDY_NAME = "ipuflow-tune"
DEFAULT_N_TRIALS = 10
FINISHED_STATES = ("COMPLETE", "PRUNED")


def trial_directory(directory: Path, number: int) -> Path:
    """The serialization directory of trial `number` under the search directory."""
    return directory / f"trial_{number:04d}"


def storage_url(directory: Path) -> str:
    """The optuna storage URL of the study kept in `directory`."""
    return f"sqlite:///{(directory / STORAGE_NAME).resolve()}"


class TrialFailed(Exception):
    """A trial's training failed at run time (diverged, ran out of memory...); the search goes on."""


@dataclass
class Search:
    """Everything one `ipuflow tune` process needs: the config, the SEARCH spec, the overrides applied
    to every trial and the directory holding the study and the trials."""

    config_file: str
    spec: SearchSpec
    directory: Path
    overrides: Dict[str, Any] = field(default_factory=dict)
    include_package: Sequence[str] = ()
    ext_vars: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def prepare(cls, config_file: Union[str, Path], spec: SearchSpec, directory: Union[str, Path],
                overrides: Union[str, Mapping[str, Any]] = "", include_package: Sequence[str] = (),
                ext_vars: Optional[Mapping[str, str]] = None) -> "Search":
        """Check the config, the overrides and every searched key before any trial runs."""
        from ipuflow.plugins import include_packages

        variables = dict(ext_vars or {})
        parsed = parse_overrides(overrides, variables or None)
        both = sorted(set(parsed) & set(spec.parameters))
        if both:
            raise ConfigurationError(
                f"tune: {both[0]!r} is both searched (SEARCH parameters) and fixed by -o; drop one of them."
            )
        include_packages(include_package)
        search = cls(str(config_file), spec, Path(directory), parsed, tuple(include_package), variables)
        search._check_keys()
        return search

    # -- the config each trial trains -----------------------------------------------------------

    def base_config(self) -> Params:
        """The config with the -o overrides (what every trial starts from)."""
        return Params.from_file(self.config_file, self.overrides, self.ext_vars)

    @property
    def metric(self) -> Union[str, List[str]]:
        """The metric the study optimises: the SEARCH's, else the config's trainer.validation_metric."""
        if self.spec.metric is not None:
            return self.spec.metric
        trainer = self.base_config().get("trainer")
        configured = trainer.get("validation_metric") if isinstance(trainer, Params) else None
        return configured if configured is not None else "-loss"

    @property
    def direction(self) -> str:
        """maximize or minimize, from the metric's sign (a list of metrics is a signed sum, maximised)."""
        from ipuflow.training.state.metric_tracker import parse_validation_metric

        tracked = parse_validation_metric(self.metric)
        implied = "minimize" if len(tracked) == 1 and tracked[0][0] < 0 else "maximize"
        if self.spec.direction is not None and self.spec.direction != implied:
            raise ConfigurationError(
                f"tune: direction {self.spec.direction!r} contradicts the metric {self.metric!r}, which is "
                f"{'lower' if implied == 'minimize' else 'higher'}-is-better; drop 'direction' or fix the metric's sign."
            )
        return implied

    def trial_overrides(self, values: Mapping[str, Any]) -> Dict[str, Any]:
        """The overrides that make a trial's config: the -o overrides plus the sampled values."""
        return {**self.overrides, **values}

    def _check_keys(self) -> None:
        """Every searched key path must lead somewhere in the config: an existing leaf, or a key that the
        component at that place accepts (checked by building every object once, as `--dry-run` does)."""
        config = self.base_config().as_dict()
        if not isinstance(config.get("trainer"), dict):
            raise ConfigurationError(f"{self.config_file}: tune needs a 'trainer' section to train each trial.")
        if not config.get("validation_data_path"):
            raise ConfigurationError(
                f"{self.config_file}: tune compares trials by their validation metric, but the config has no "
                f"validation_data_path."
            )
        sample = {key: distribution.representative() for key, distribution in self.spec.parameters.items()}
        new_leaves = []
        for key, value in sample.items():
            try:
                with_overrides(config, {key: value})
            except ConfigurationError as error:
                raise ConfigurationError(f"SEARCH parameters.{key}: unknown config key path: {error}") from None
            if not _has_path(config, key):
                new_leaves.append(key)
        self.direction  # a contradictory direction is an error now
        if not new_leaves:
            return
        from ipuflow.experiment.run import train_model_from_file

        logger.info("tune: checking %s (not in the config) by building every object once.", ", ".join(new_leaves))
        with tempfile.TemporaryDirectory(prefix="ipuflow-tune-check-") as scratch:
            try:
                train_model_from_file(self.config_file, scratch, overrides=self.trial_overrides(sample), dry_run=True,
                                      ext_vars=self.ext_vars)
            except ConfigurationError as error:
                raise ConfigurationError(
                    f"SEARCH parameters {', '.join(new_leaves)}: the config does not set "
                    f"{'this key' if len(new_leaves) == 1 else 'these keys'}, and building with "
                    f"{'it' if len(new_leaves) == 1 else 'them'} failed: {error}"
                ) from None

    # -- the study ------------------------------------------------------------------------------

    @property
    def study_name(self) -> str:
        """The study's name in the storage."""
        return self.spec.study_name or DEFAULT_STUDY_NAME

    def open_study(self, resume: bool) -> Any:
        """Create the study in DIR (an empty or new directory), or with `resume` load it (creating it
        if DIR holds none yet) after checking it searches the same space."""
        import optuna

        sampler, pruner = build_sampler(self.spec), build_pruner(self.spec.pruner)  # bad arguments: errors now
        self.directory.mkdir(parents=True, exist_ok=True)
        stored = self.directory / STORAGE_NAME
        if not resume and any(self.directory.iterdir()):
            raise ConfigurationError(
                f"Search directory {self.directory} already exists and is not empty. Use -r/--resume to continue "
                f"(or join) the search in it, or choose another directory."
            )
        record = {"config_file": self.config_file, "overrides": self.overrides, "search": self.spec.as_dict(),
                  "metric": self.metric}
        exists = stored.is_file() and self.study_name in optuna.study.get_all_study_names(storage_url(self.directory))
        storage = optuna.storages.RDBStorage(storage_url(self.directory))
        if exists:
            study = optuna.load_study(study_name=self.study_name, storage=storage)
            _check_same_search(study.user_attrs.get("record", {}), record, self.directory)
            mark_stale_trials(study)
            if len(study.trials):
                sampler = build_sampler(self.spec, len(study.trials))
        else:
            study = optuna.create_study(storage=storage, study_name=self.study_name,
                                        direction=optuna.study.StudyDirection[self.direction.upper()])
            study.set_user_attr("record", json.loads(json.dumps(record)))
            (self.directory / SEARCH_NAME).write_text(json.dumps(record, indent=2) + "\n")
        # The sampler and pruner are not stored with the study; every process builds its own. A
        # resumed or joining process shifts the sampler's seed so it does not redraw the same points.
        return optuna.load_study(study_name=self.study_name, storage=storage, sampler=sampler, pruner=pruner)

    def run(self, study: Any, n_trials: Optional[int] = None, timeout: Optional[float] = None) -> int:
        """Run trials until the study holds `n_trials` finished (complete or pruned) trials, counting
        those of earlier and of cooperating processes, or until `timeout` seconds; the trials run here."""
        from optuna.study import MaxTrialsCallback
        from optuna.trial import TrialState

        target = n_trials or self.spec.n_trials or DEFAULT_N_TRIALS
        finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
        remaining = max(0, target - finished)
        if remaining == 0:
            logger.info("tune: the study already holds %d finished trials (asked for %d).", finished, target)
            return 0
        before = len(study.trials)
        study.optimize(
            self._objective(study), n_trials=remaining, timeout=timeout or self.spec.timeout,
            catch=(TrialFailed,), gc_after_trial=True,
            callbacks=[MaxTrialsCallback(target, states=(TrialState.COMPLETE, TrialState.PRUNED))],
        )
        return len(study.trials) - before

    def _objective(self, study: Any) -> Any:
        import optuna

        from ipuflow.experiment.run import train_model_from_file
        from ipuflow.training.state.interruption import TrainingInterrupted
        from ipuflow.tuning.pruning_callback import PRUNED_AT_ATTRIBUTE

        storage = study._storage  # the same RDB storage object the study writes through
        study_id = storage.get_study_id_from_name(study.study_name)
        config = self.base_config()
        trainer = config.get("trainer")
        callbacks = trainer.get("callbacks") if isinstance(trainer, Params) else None
        existing = callbacks.as_dict() if isinstance(callbacks, Params) else list(callbacks or [])
        metric, maximize = self.metric, self.direction == "maximize"

        def objective(trial: Any) -> float:
            values = {key: distribution.suggest(trial) for key, distribution in self.spec.parameters.items()}
            directory = trial_directory(self.directory, trial.number)
            overrides = self.trial_overrides(values)
            trial.set_user_attr("serialization_dir", str(directory))
            trial.set_user_attr("overrides", json.loads(json.dumps(overrides)))
            trial.set_user_attr("host", socket.gethostname())
            trial.set_user_attr("pid", os.getpid())
            pruning = {"type": "optuna_pruning", "storage": storage_url(self.directory),
                       "study_name": study.study_name, "trial_number": trial.number, "metric": metric,
                       "pruner": self.spec.pruner}
            started = time.monotonic()
            error: Optional[str] = None
            try:
                train_model_from_file(
                    self.config_file, directory, overrides={**overrides, "trainer.callbacks": [*existing, pruning]},
                    include_package=self.include_package, ext_vars=self.ext_vars, file_friendly_logging=True,
                )
            except (ConfigurationError, TrainingInterrupted, KeyboardInterrupt):
                raise
            except Exception as failure:  # a runtime failure ends this trial only
                error = f"{type(failure).__name__}: {failure}"
                trial.set_user_attr("error", error)
                raise TrialFailed(f"trial {trial.number} failed: {error}") from failure
            finally:
                _write_trial_record(directory, trial.number, study.study_name, values, overrides,
                                    time.monotonic() - started, error)
            frozen = storage.get_trial(storage.get_trial_id_from_study_id_trial_number(study_id, trial.number))
            reported = list(frozen.intermediate_values.values())
            if not reported:
                raise ConfigurationError(f"tune: trial {trial.number} ran no validation, so it has no {metric!r} to compare.")
            if PRUNED_AT_ATTRIBUTE in frozen.user_attrs:
                raise optuna.TrialPruned(f"pruned after {frozen.user_attrs[PRUNED_AT_ATTRIBUTE]} optimizer updates")
            return max(reported) if maximize else min(reported)

        return objective


def _has_path(config: Mapping[str, Any], dotted_key: str) -> bool:
    node: Any = config
    for part in dotted_key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _write_trial_record(directory: Path, number: int, study_name: str, values: Mapping[str, Any],
                        overrides: Mapping[str, Any], seconds: float, error: Optional[str]) -> None:
    """What tune did to this run: the trial, the sampled values and the overrides (beside config.json)."""
    if not directory.is_dir():
        return
    from ipuflow.storage import write_json_atomically

    write_json_atomically(directory / TRIAL_RECORD_NAME, {
        "trial": number, "study_name": study_name, "params": dict(values), "overrides": dict(overrides),
        "seconds": round(seconds, 3), "error": error,
    })


def _check_same_search(stored: Mapping[str, Any], current: Mapping[str, Any], directory: Path) -> None:
    current = json.loads(json.dumps(current))
    differing = [key for key in ("config_file", "overrides", "search", "metric") if stored.get(key) != current.get(key)]
    if stored and differing:
        raise ConfigurationError(
            f"--resume: the search in {directory} was started with a different {', '.join(differing)} "
            f"(stored: {json.dumps({key: stored.get(key) for key in differing})}). Resume with the same CONFIG, "
            f"SEARCH and -o, or start a new search in another directory."
        )


def mark_stale_trials(study: Any) -> List[int]:
    """Mark as failed the running trials whose process (on this host) is gone, e.g. killed; return their
    numbers. Trials of live processes, here or on other hosts, are left alone."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    stale = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid = trial.user_attrs.get("pid")
        if trial.user_attrs.get("host") != host or not isinstance(pid, int) or _process_alive(pid):
            continue
        study._storage.set_trial_user_attr(trial._trial_id, "error", "interrupted: its process ended mid-trial")
        study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        stale.append(trial.number)
    if stale:
        logger.info("tune: trials %s were left running by a process that ended; marked failed.", stale)
    return stale


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _component(kind: str, block: Mapping[str, Any], factories: Mapping[str, Any]) -> Any:
    arguments = {key: value for key, value in block.items() if key != "type"}
    try:
        return factories[block["type"]](**arguments)
    except TypeError as error:
        raise ConfigurationError(f"SEARCH {kind} {block['type']!r}: bad arguments {sorted(arguments)}: {error}") from None
    except ValueError as error:
        raise ConfigurationError(f"SEARCH {kind} {block['type']!r}: {error}") from None


def build_sampler(spec: SearchSpec, seed_offset: int = 0) -> Any:
    """The optuna sampler the SEARCH names (`tpe` by default), its seed shifted by `seed_offset`."""
    import optuna

    block = dict(spec.sampler)
    if isinstance(block.get("seed"), int) and seed_offset:
        block["seed"] = block["seed"] + seed_offset
    samplers = {
        "tpe": optuna.samplers.TPESampler,
        "random": optuna.samplers.RandomSampler,
        "cmaes": optuna.samplers.CmaEsSampler,
        "qmc": optuna.samplers.QMCSampler,
        "gp": optuna.samplers.GPSampler,
        "nsgaii": optuna.samplers.NSGAIISampler,
        "grid": lambda **arguments: optuna.samplers.GridSampler(grid_space(spec), **arguments),
    }
    return _component("sampler", block, samplers)


def grid_space(spec: SearchSpec) -> Dict[str, List[Any]]:
    """Every value of every parameter, for the grid sampler (which needs discrete parameters)."""
    from ipuflow.tuning.search_space import _encode_choice

    space: Dict[str, List[Any]] = {}
    for key, distribution in spec.parameters.items():
        if distribution.type == "categorical":
            space[key] = [_encode_choice(choice) for choice in distribution.choices or []]
        elif (distribution.step is not None or distribution.type == "int") and distribution.low is not None \
                and distribution.high is not None:
            step = distribution.step or 1
            count = int(round((distribution.high - distribution.low) / step)) + 1
            space[key] = [distribution.low + index * step for index in range(count)]
        else:
            raise ConfigurationError(
                f"SEARCH sampler grid: parameters.{key} is a continuous range; give it a 'step' or choices."
            )
    return space


def build_pruner(block: Mapping[str, Any]) -> Any:
    """The optuna pruner a SEARCH's pruner block names (`median` by default; `none` never prunes)."""
    import optuna

    pruners = {
        "median": optuna.pruners.MedianPruner,
        "percentile": optuna.pruners.PercentilePruner,
        "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
        "hyperband": optuna.pruners.HyperbandPruner,
        "threshold": optuna.pruners.ThresholdPruner,
        "patient": lambda patience, **arguments: optuna.pruners.PatientPruner(optuna.pruners.MedianPruner(**arguments), patience),
        "wilcoxon": optuna.pruners.WilcoxonPruner,
        "none": optuna.pruners.NopPruner,
    }
    return _component("pruner", block, pruners)
