"""`ipuflow tune CONFIG SEARCH -s DIR`: hyperparameter search over config keys with optuna."""

from __future__ import annotations

import json
from typing import Optional, Tuple

import click

from ipuflow.commands.cli import EXIT_RUNTIME_ERROR, debug_option, include_package_option, report_error
from ipuflow.commands.train import parse_ext_vars

SEARCH_HELP = """
\b
SEARCH is a Jsonnet/JSON/YAML object:
  {
    "parameters": {                      // config key paths -> distributions
      "trainer.optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": true},
      "model.dropout": {"type": "float", "low": 0.0, "high": 0.6, "step": 0.1},
      "trainer.num_epochs": {"type": "int", "low": 2, "high": 8},
      "data_loader.batch_size": {"type": "categorical", "choices": [16, 32, 64]}
    },
    "n_trials": 12,                      // default 10; --n-trials wins
    "metric": "+accuracy",               // default: the config's trainer.validation_metric
    "direction": "maximize",             // default: from the metric's sign
    "sampler": {"type": "tpe", "seed": 0},  // tpe, random, grid, cmaes, qmc, gp, nsgaii
    "pruner": {"type": "median", "n_warmup_steps": 1},  // median, percentile,
                                         // successive_halving, hyperband, threshold,
                                         // patient, wilcoxon, none
    "timeout": 3600,                     // seconds; --timeout wins
    "study_name": "my-search"
  }
\b
A float/int takes low, high and optionally log (true) or step; a categorical takes choices
(any JSON values, objects included). Sampler and pruner blocks pass their other keys to optuna.
Each trial is an ordinary `ipuflow train` run in DIR/trial_NNNN (its sampled values and
overrides in tune_trial.json); the study lives in DIR/study.db, so -r resumes an interrupted
search and several processes started with -r on one DIR share the work. DIR also gets
trials.csv, trials.json, best_trial.json, best_config.json (ready for `ipuflow train`) and,
with plotly or matplotlib installed, plots/.
"""


@click.command("tune", epilog=SEARCH_HELP)
@click.argument("config_file", metavar="CONFIG")
@click.argument("search_file", metavar="SEARCH")
@click.option("-s", "--serialization-dir", required=True, metavar="DIR",
              help="Directory for the study (study.db), every trial's run directory and the results.")
@click.option("-r", "--resume", is_flag=True,
              help="Continue the search in DIR (or join it from another process); finished trials are kept.")
@click.option("-n", "--n-trials", type=click.IntRange(min=1), metavar="N",
              help="Finished (complete or pruned) trials the study should hold (default: SEARCH's n_trials, else 10).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Start no new trial after this many seconds (default: SEARCH's timeout).")
@click.option("-o", "--overrides", default="", metavar="JSON",
              help="Jsonnet/JSON edits applied to every trial's config, as in `ipuflow train`.")
@click.option("--ext-var", multiple=True, metavar="KEY=VALUE", help="A Jsonnet external variable (repeatable).")
@include_package_option
@debug_option
def tune(config_file: str, search_file: str, serialization_dir: str, resume: bool, n_trials: Optional[int],
         timeout: Optional[float], overrides: str, ext_var: Tuple[str, ...], include_package: Tuple[str, ...]) -> int:
    """Search the hyperparameters SEARCH names for the experiment in CONFIG, one training run per trial."""
    from ipuflow.distributed.launch import refuse_under_torchrun

    refuse_under_torchrun("ipuflow tune")

    from ipuflow.config.requirements import OPTUNA, require_packages

    require_packages("ipuflow tune", OPTUNA)

    from ipuflow.experiment.serialization_dir import configure_logging
    from ipuflow.training.state.interruption import TrainingInterrupted
    from ipuflow.tuning.results import format_table, write_results
    from ipuflow.tuning.search_space import SearchSpec
    from ipuflow.tuning.study import Search

    configure_logging()
    variables = parse_ext_vars(ext_var)
    spec = SearchSpec.from_file(search_file, variables)
    search = Search.prepare(config_file, spec, serialization_dir, overrides, include_package, variables)
    study = search.open_study(resume)
    interrupted: Optional[str] = None
    try:
        search.run(study, n_trials=n_trials, timeout=timeout)
    except (TrainingInterrupted, KeyboardInterrupt) as stop:
        interrupted = str(stop) or "interrupted"
    results = write_results(study, search)
    configure_logging()  # the last trial pointed the log at its own out.log
    click.echo(format_table(results["rows"], list(spec.parameters)))
    best = results["best"]
    if best is not None:
        click.echo(f"Best trial {best['number']}: {search.metric} = {best['value']:.6g} with "
                   f"{json.dumps(best['params'])} ({best['serialization_dir']}); config in "
                   f"{search.directory / 'best_config.json'}")
    else:
        click.echo("No trial completed yet.")
    if interrupted is not None:
        return report_error(f"The search was interrupted ({interrupted}). Run the same command with -r to resume it.",
                            EXIT_RUNTIME_ERROR)
    return 0
