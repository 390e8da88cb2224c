"""Tracks the validation score across validations: best value, patience, early stopping."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.errors import did_you_mean


def parse_validation_metric(validation_metric: Union[str, List[str]], key: str = "validation_metric") -> List[Tuple[float, str]]:
    """``"-loss"`` or ``["+accuracy", "-loss"]`` → ``[(sign, name), ...]``; errors name `key`."""
    names = [validation_metric] if isinstance(validation_metric, str) else list(validation_metric)
    if not names:
        raise ConfigurationError(key=key, expected="a metric name or a list of them", found=[])
    parsed = []
    for name in names:
        if not isinstance(name, str) or not name or name[0] not in "+-":
            raise ConfigurationError(
                f"each metric name must start with + (higher is better) or - (lower is better), e.g. '-loss'; "
                f"found {name!r}.",
                key=key,
            )
        parsed.append((1.0 if name[0] == "+" else -1.0, name[1:]))
    return parsed


class MetricTracker:
    """Keeps the best combined score (Σ sign × metric); improvement means strictly greater.

    `patience` is the number of validations without improvement after which
    `should_stop_early()` says so; None never stops.
    """

    def __init__(self, metric_name: Union[str, List[str]] = "-loss", patience: Optional[int] = None) -> None:
        validators.positive_int("patience", patience, optional=True)  # null disables early stopping
        self._patience = patience
        self.tracked_metrics = parse_validation_metric(metric_name)
        self.clear()

    def check_names(self, reported: Iterable[str], key: str = "validation_metric") -> None:
        """Refuse a tracked metric that is not among the names validation reports (`reported`),
        suggesting the closest (`acc` → `accuracy` too): checked before training, not after the
        first epoch's validation."""
        reported = sorted(set(reported))
        for sign, name in self.tracked_metrics:
            if name not in reported:
                # `acc` for `accuracy`, or, with several validation sets, `loss` for `<set>_loss`.
                extensions = [metric for metric in reported if metric.startswith(name) or metric.endswith(f"_{name}")]
                hint = f" Did you mean {extensions[0]!r}?" if extensions else did_you_mean(name, reported)
                raise ConfigurationError(
                    f"{'+' if sign > 0 else '-'}{name} names {name!r}, which the model does not report in "
                    f"validation.{hint} It reports: {', '.join(reported) or 'nothing'}.",
                    key=key,
                )

    def clear(self) -> None:
        """Forget every score seen (the patience stays)."""
        self._best_so_far: Optional[float] = None
        self._epochs_with_no_improvement = 0
        self._is_best_so_far = True
        self._epoch_number = 0
        self.best_epoch: Optional[int] = None
        self.best_epoch_metrics: Dict[str, float] = {}

    def combined_score(self, metrics: Dict[str, float]) -> float:
        """Σ sign × metric over the tracked metrics."""
        try:
            return sum(sign * float(metrics[name]) for sign, name in self.tracked_metrics)
        except KeyError as error:
            # Raised while training, outside the resolver: the path is where the trainer's metric is configured.
            raise ConfigurationError(
                f"uses {error.args[0]!r}, but validation produced only {sorted(metrics)}.",
                path="trainer.validation_metric",
            ) from None

    def reported_value(self, metrics: Dict[str, float]) -> float:
        """The value to report for the tracked metric: itself for one name (so that accuracy reads
        as accuracy, loss as loss), the signed sum for a list."""
        if len(self.tracked_metrics) == 1:
            self.combined_score(metrics)  # the same error for a missing metric
            return float(metrics[self.tracked_metrics[0][1]])
        return self.combined_score(metrics)

    def add_metrics(self, metrics: Dict[str, float]) -> None:
        """Record one validation's metrics."""
        score = self.combined_score(metrics)
        if self._best_so_far is None or score > self._best_so_far:
            self._best_so_far = score
            self._epochs_with_no_improvement = 0
            self._is_best_so_far = True
            self.best_epoch = self._epoch_number
        else:
            self._epochs_with_no_improvement += 1
            self._is_best_so_far = False
        self._epoch_number += 1

    def is_best_so_far(self) -> bool:
        """Whether the last recorded validation was a (strict) improvement."""
        return self._is_best_so_far

    @property
    def patience(self) -> Optional[int]:
        """Validations without improvement before early stopping (None: never)."""
        return self._patience

    def should_stop_early(self) -> bool:
        """Whether `patience` validations in a row brought no improvement."""
        return self._patience is not None and self._epochs_with_no_improvement >= self._patience

    def state_dict(self) -> Dict[str, Any]:
        """Plain values for the checkpoint."""
        return {
            "best_so_far": self._best_so_far,
            "epochs_with_no_improvement": self._epochs_with_no_improvement,
            "is_best_so_far": self._is_best_so_far,
            "epoch_number": self._epoch_number,
            "best_epoch": self.best_epoch,
            "best_epoch_metrics": dict(self.best_epoch_metrics),
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self._best_so_far = state_dict["best_so_far"]
        self._epochs_with_no_improvement = state_dict["epochs_with_no_improvement"]
        self._is_best_so_far = state_dict["is_best_so_far"]
        self._epoch_number = state_dict["epoch_number"]
        self.best_epoch = state_dict["best_epoch"]
        self.best_epoch_metrics = dict(state_dict.get("best_epoch_metrics", {}))
