"""What a search leaves besides the trials: the table of trials, the best config, optuna's plots."""

from __future__ import annotations

import csv
import io
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuflow.storage import write_atomically, write_json_atomically
from ipuflow.tuning.search_space import decode_param
from ipuflow.tuning.study import Search

logger = logging.getLogger(__name__)

TABLE_CSV_NAME = "trials.csv"
TABLE_JSON_NAME = "trials.json"
BEST_CONFIG_NAME = "best_config.json"
BEST_TRIAL_NAME = "best_trial.json"
PLOTS_DIR = "plots"


def trial_rows(study: Any, search: Search) -> List[Dict[str, Any]]:
    """One row per trial: number, state, value, duration, each searched key's value, its directory."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        duration = trial.duration.total_seconds() if trial.duration is not None else None
        row: Dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name,
            "value": trial.value if trial.value is not None else _last_reported(trial),
            "duration_s": round(duration, 1) if duration is not None else None,
        }
        for key in search.spec.parameters:
            row[key] = decode_param(trial.params[key]) if key in trial.params else None
        row["pruned_at_step"] = trial.user_attrs.get("pruned_at_step")
        row["error"] = trial.user_attrs.get("error")
        row["serialization_dir"] = trial.user_attrs.get("serialization_dir")
        rows.append(row)
    return rows


def _last_reported(trial: Any) -> Optional[float]:
    """A pruned trial's value: the last validation it reported."""
    if not trial.intermediate_values:
        return None
    return trial.intermediate_values[max(trial.intermediate_values)]


def format_table(rows: List[Dict[str, Any]], keys: List[str]) -> str:
    """The trials as an aligned text table (value to 4 decimals)."""
    columns = ["number", "state", "value", "duration_s", *keys]

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}".rstrip("0").rstrip(".")
        return json.dumps(value) if isinstance(value, (dict, list)) else str(value)

    headers = ["trial", "state", "value", "seconds", *keys]
    table = [headers] + [[cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(line[index]) for line in table) for index in range(len(headers))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in table)


def write_results(study: Any, search: Search) -> Dict[str, Any]:
    """Write trials.csv/json, the best trial's record and config, and the plots; return the best trial
    as a dict (None when no trial completed)."""
    directory = search.directory
    rows = trial_rows(study, search)
    write_json_atomically(directory / TABLE_JSON_NAME, rows)
    if rows:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: json.dumps(value) if isinstance(value, (dict, list)) else value for key, value in row.items()})
        write_atomically(directory / TABLE_CSV_NAME, lambda path: Path(path).write_text(buffer.getvalue()))
    best = best_trial(study, search)
    if best is not None:
        write_json_atomically(directory / BEST_TRIAL_NAME, best)
        config = search.base_config().as_dict()
        from ipuflow.config.params import with_overrides

        write_json_atomically(directory / BEST_CONFIG_NAME, with_overrides(config, best["params"]))
    write_plots(study, directory / PLOTS_DIR)
    return {"rows": rows, "best": best}


def best_trial(study: Any, search: Search) -> Optional[Dict[str, Any]]:
    """The best complete trial: number, value, params (config values), directory, metric."""
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    trial = study.best_trial
    return {
        "number": trial.number,
        "value": trial.value,
        "metric": search.metric,
        "direction": search.direction,
        "params": {key: decode_param(value) for key, value in trial.params.items()},
        "serialization_dir": trial.user_attrs.get("serialization_dir"),
    }


def write_plots(study: Any, directory: Path) -> List[Path]:
    """optuna's optimisation history and parameter importances, as HTML (plotly) and PNG (matplotlib)
    where those libraries are installed; a plot that cannot be drawn (too few trials) is skipped."""
    written: List[Path] = []
    complete = [trial for trial in study.get_trials(deepcopy=False) if trial.state.name == "COMPLETE"]
    if not complete:
        return written
    plots = {"optimization_history": "plot_optimization_history", "param_importances": "plot_param_importances"}
    try:
        import plotly  # type: ignore[import-not-found]  # noqa: F401

        from optuna import visualization
    except ImportError:
        logger.info("tune: plotly is not installed; no HTML plots.")
    else:
        for name, function in plots.items():
            try:
                figure = getattr(visualization, function)(study)
                directory.mkdir(parents=True, exist_ok=True)
                figure.write_html(str(directory / f"{name}.html"))
                written.append(directory / f"{name}.html")
            except Exception as error:  # e.g. importances need two complete trials with varied params
                logger.info("tune: no %s plot: %s", name, error)
    try:
        import matplotlib  # type: ignore[import-not-found]

        matplotlib.use("Agg")
        from optuna.visualization import matplotlib as optuna_matplotlib
    except ImportError:
        logger.info("tune: matplotlib is not installed; no PNG plots.")
    else:
        import warnings

        for name, function in plots.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
                    axes = getattr(optuna_matplotlib, function)(study)
                directory.mkdir(parents=True, exist_ok=True)
                axes.figure.savefig(str(directory / f"{name}.png"), bbox_inches="tight")
                written.append(directory / f"{name}.png")
                import matplotlib.pyplot as pyplot  # type: ignore[import-not-found]

                pyplot.close(axes.figure)
            except Exception as error:
                logger.info("tune: no %s plot: %s", name, error)
    return written
