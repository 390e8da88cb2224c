"""The SEARCH file of `ipuflow tune`: which config keys to vary, how, and how to run the study.

```
{
  "parameters": {
    "trainer.optimizer.lr": {"type": "float", "low": 1e-4, "high": 3e-2, "log": true},
    "model.dropout": {"type": "float", "low": 0.0, "high": 0.6, "step": 0.1},
    "trainer.num_epochs": {"type": "int", "low": 2, "high": 6},
    "data_loader.batch_size": {"type": "categorical", "choices": [16, 32, 64]},
  },
  "n_trials": 12,
  "metric": "+accuracy",            // default: the config's trainer.validation_metric
  "direction": "maximize",          // default: from the metric's sign
  "sampler": {"type": "tpe", "seed": 0},
  "pruner": {"type": "median", "n_warmup_steps": 1},
  "timeout": 3600,
  "study_name": "quickstart",
}
```
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ipuflow.config import ConfigurationError, Params, validators

SPEC_KEYS = ("parameters", "n_trials", "metric", "direction", "sampler", "pruner", "timeout", "study_name")
DISTRIBUTION_TYPES = ("float", "int", "categorical")
SAMPLERS = ("tpe", "random", "grid", "cmaes", "qmc", "gp", "nsgaii")
PRUNERS = ("median", "percentile", "successive_halving", "hyperband", "threshold", "patient", "wilcoxon", "none")


@dataclass(frozen=True)
class Distribution:
    """How one config key is sampled: a float or int range (optionally log-scaled or stepped) or a
    list of categorical choices (any JSON values)."""

    key: str
    type: str
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    step: Optional[float] = None
    choices: Optional[List[Any]] = None

    def suggest(self, trial: Any) -> Any:
        """The value `trial` (an optuna Trial) samples for this key."""
        if self.type == "categorical":
            # optuna stores categorical choices as JSON scalars; objects and lists travel as JSON text.
            encoded = [_encode_choice(choice) for choice in self.choices or []]
            return _decode_choice(trial.suggest_categorical(self.key, encoded))
        low, high = self.low, self.high
        assert low is not None and high is not None  # set for every numeric distribution
        if self.type == "float":
            return trial.suggest_float(self.key, low, high, log=self.log, step=self.step)
        return trial.suggest_int(self.key, int(low), int(high), log=self.log, step=int(self.step or 1))

    def representative(self) -> Any:
        """A value inside the distribution, used to check the key before any trial runs."""
        if self.type == "categorical":
            return (self.choices or [None])[0]
        assert self.low is not None
        if self.type == "int":
            return int(self.low)
        return float(self.low)

    def as_dict(self) -> Dict[str, Any]:
        """The distribution as written in a SEARCH file."""
        if self.type == "categorical":
            return {"type": "categorical", "choices": self.choices}
        result: Dict[str, Any] = {"type": self.type, "low": self.low, "high": self.high}
        if self.log:
            result["log"] = True
        if self.step is not None:
            result["step"] = self.step
        return result


def _encode_choice(choice: Any) -> Any:
    return json.dumps(choice, sort_keys=True) if isinstance(choice, (dict, list)) else choice


def _decode_choice(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def decode_param(value: Any) -> Any:
    """A parameter value as optuna stored it, back as the config value it stands for."""
    return _decode_choice(value)


@dataclass
class SearchSpec:
    """A parsed SEARCH file: the distributions by config key path and the study's settings."""

    parameters: Dict[str, Distribution]
    n_trials: Optional[int] = None
    metric: Optional[Union[str, List[str]]] = None
    direction: Optional[str] = None
    sampler: Dict[str, Any] = field(default_factory=lambda: {"type": "tpe"})
    pruner: Dict[str, Any] = field(default_factory=lambda: {"type": "median"})
    timeout: Optional[float] = None
    study_name: Optional[str] = None

    @classmethod
    def from_file(cls, path: Union[str, Path], ext_vars: Optional[Mapping[str, str]] = None) -> "SearchSpec":
        """Read and check a SEARCH file (Jsonnet, JSON or YAML)."""
        return cls.from_dict(Params.from_file(path, ext_vars=ext_vars).as_dict(), source=str(path))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "search") -> "SearchSpec":
        """Check a SEARCH object; every error names the offending key."""
        unknown = [key for key in raw if key not in SPEC_KEYS]
        if unknown:
            from ipuflow.config.errors import did_you_mean

            raise ConfigurationError(
                f"{source}: unknown key {unknown[0]!r}.{did_you_mean(unknown[0], list(SPEC_KEYS))} A SEARCH file "
                f"takes {', '.join(SPEC_KEYS)}; the distributions go under 'parameters', keyed by config key path "
                f"(see ipuflow tune --help)."
            )
        parameters = raw.get("parameters")
        if not isinstance(parameters, Mapping) or not parameters:
            raise ConfigurationError(
                f"{source}: 'parameters' must be a non-empty object of config key paths to distributions, e.g. "
                f"{{\"trainer.optimizer.lr\": {{\"type\": \"float\", \"low\": 1e-4, \"high\": 1e-2, \"log\": true}}}}; "
                f"found {parameters!r}."
            )
        distributions = {key: _parse_distribution(key, value, source) for key, value in parameters.items()}
        n_trials = raw.get("n_trials")
        direction = raw.get("direction")
        try:
            validators.positive_int("n_trials", n_trials, optional=True)
            validators.positive_number("timeout", raw.get("timeout"), optional=True)
            validators.choice("direction", direction, ("maximize", "minimize"), optional=True)
        except ConfigurationError as error:
            raise error.locate(f"{source}: ") from None
        metric = raw.get("metric")
        if metric is not None:
            from ipuflow.training.state.metric_tracker import parse_validation_metric

            try:
                parse_validation_metric(metric)
            except ConfigurationError as error:
                raise ConfigurationError(f"{source}: metric: {error.explanation}") from None
        timeout = raw.get("timeout")
        study_name = raw.get("study_name")
        if study_name is not None and (not isinstance(study_name, str) or not study_name):
            raise ConfigurationError(f"{source}: study_name: expected a non-empty string, found {study_name!r}.")
        return cls(
            parameters=distributions,
            n_trials=n_trials,
            metric=metric,
            direction=direction,
            sampler=_parse_component("sampler", raw.get("sampler", "tpe"), SAMPLERS, source),
            pruner=_parse_component("pruner", raw.get("pruner", "median"), PRUNERS, source),
            timeout=float(timeout) if timeout is not None else None,
            study_name=study_name,
        )

    def as_dict(self) -> Dict[str, Any]:
        """The spec as a SEARCH object (what `from_dict` reads)."""
        return {
            "parameters": {key: distribution.as_dict() for key, distribution in self.parameters.items()},
            "n_trials": self.n_trials,
            "metric": self.metric,
            "direction": self.direction,
            "sampler": self.sampler,
            "pruner": self.pruner,
            "timeout": self.timeout,
            "study_name": self.study_name,
        }


def _number(key: str, name: str, value: Any, source: str, integer: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ConfigurationError(f"{source}: parameters.{key}.{name}: expected {kind}, found {value!r}.")
    if not math.isfinite(value):
        raise ConfigurationError(f"{source}: parameters.{key}.{name}: expected a finite number, found {value!r}.")
    return value


def _parse_distribution(key: str, raw: Any, source: str) -> Distribution:
    where = f"{source}: parameters.{key}"
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise ConfigurationError(f"{source}: parameters: {key!r} is not a config key path such as 'trainer.optimizer.lr'.")
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"{where}: expected a distribution object such as {{\"type\": \"float\", \"low\": 0.0, \"high\": 0.5}}, "
            f"found {raw!r}."
        )
    kind = raw.get("type")
    if kind not in DISTRIBUTION_TYPES:
        raise ConfigurationError(f"{where}.type: expected one of {', '.join(DISTRIBUTION_TYPES)}, found {kind!r}.")
    allowed = ("type", "choices") if kind == "categorical" else ("type", "low", "high", "log", "step")
    extra = [name for name in raw if name not in allowed]
    if extra:
        raise ConfigurationError(f"{where}: unknown key {extra[0]!r} for a {kind} distribution; it takes {', '.join(allowed)}.")
    if kind == "categorical":
        choices = raw.get("choices")
        if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
            raise ConfigurationError(f"{where}.choices: a categorical distribution needs a non-empty list of choices, found {choices!r}.")
        encoded = [_encode_choice(choice) for choice in choices]
        if len(set(map(repr, encoded))) != len(encoded):
            raise ConfigurationError(f"{where}.choices: the choices repeat a value: {list(choices)!r}.")
        return Distribution(key, kind, choices=list(choices))
    integer = kind == "int"
    for name in ("low", "high"):
        if name not in raw:
            raise ConfigurationError(f"{where}: a {kind} distribution needs '{name}'.")
    low = _number(key, "low", raw["low"], source, integer)
    high = _number(key, "high", raw["high"], source, integer)
    if low > high:
        raise ConfigurationError(f"{where}: low ({low!r}) is greater than high ({high!r}).")
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise ConfigurationError(f"{where}.log: expected true or false, found {log!r}.")
    step = raw.get("step")
    if step is not None:
        step = _number(key, "step", step, source, integer)
        if step <= 0:
            raise ConfigurationError(f"{where}.step: expected a positive number, found {step!r}.")
        if log:
            raise ConfigurationError(f"{where}: 'step' and 'log' cannot be used together (optuna samples one or the other).")
    if log and low <= 0:
        raise ConfigurationError(f"{where}: a log-scaled distribution needs low > 0, found low = {low!r}.")
    if integer:
        low, high = int(low), int(high)
        step = int(step) if step is not None else None
    return Distribution(key, kind, low=low, high=high, log=log, step=step)


def _parse_component(name: str, raw: Any, known: Sequence[str], source: str) -> Dict[str, Any]:
    """A sampler or pruner block: a name or ``{"type": name, ...its optuna arguments}``."""
    block = {"type": raw} if isinstance(raw, str) else dict(raw) if isinstance(raw, Mapping) else None
    if block is None or block.get("type") not in known:
        from ipuflow.config.errors import did_you_mean

        found = block.get("type") if block is not None else raw
        hint = did_you_mean(str(found), list(known)) if isinstance(found, str) else ""
        raise ConfigurationError(f"{source}: {name}: expected one of {', '.join(known)} (a name or {{\"type\": ...}}), "
                                 f"found {found!r}.{hint}")
    return block
