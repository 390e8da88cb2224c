"""`ipuflow train CONFIG -s DIR`: train a model from a config file."""

from __future__ import annotations

import json
import os
from typing import Dict, Tuple

import click

from ipuflow.commands.cli import EXIT_RUNTIME_ERROR, debug_option, include_package_option, report_error
from ipuflow.config import ConfigurationError


def parse_ext_vars(pairs: Tuple[str, ...]) -> Dict[str, str]:
    """`KEY=VALUE` strings as a dict; a pair without `=` is a usage error."""
    variables = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--ext-var")
        variables[key] = value
    return variables


@click.command("train")
@click.argument("config_file", metavar="CONFIG")
@click.option("-s", "--serialization-dir", required=True, metavar="DIR",
              help="Directory for checkpoints, logs, metrics and the model archive.")
@click.option("-r", "--recover", is_flag=True, help="Continue the run in DIR from its latest checkpoint.")
@click.option("-f", "--force", is_flag=True, help="Delete DIR's contents and start over.")
@click.option("-o", "--overrides", default="", metavar="JSON",
              help='Jsonnet/JSON object of edits, e.g. \'{"trainer.num_epochs": 3}\'.')
@click.option("--dry-run", is_flag=True, help="Build every object and report the plan; train nothing.")
@click.option("--file-friendly-logging", is_flag=True, help="Progress output suited to log files.")
@click.option("--ext-var", multiple=True, metavar="KEY=VALUE", help="A Jsonnet external variable (repeatable).")
@click.option("--no-cache", is_flag=True, help="Read and tokenize the data afresh instead of from the data cache.")
@include_package_option
@debug_option
def train(config_file: str, serialization_dir: str, recover: bool, force: bool, overrides: str, dry_run: bool,
          file_friendly_logging: bool, ext_var: Tuple[str, ...], include_package: Tuple[str, ...],
          no_cache: bool = False) -> int:
    """Train the experiment in CONFIG (.jsonnet, .json or .yaml), writing everything to DIR."""
    if no_cache:
        from ipuflow.data.columnar.cache import NO_CACHE_ENV

        os.environ[NO_CACHE_ENV] = "1"  # read by every dataset reader's cache settings
    from ipuflow.experiment.run import train_model_from_file
    from ipuflow.training.interruption import TrainingInterrupted

    try:
        result = train_model_from_file(
            config_file, serialization_dir, overrides=overrides, recover=recover, force=force, dry_run=dry_run,
            include_package=include_package, ext_vars=parse_ext_vars(ext_var),
            file_friendly_logging=file_friendly_logging,
        )
    except TrainingInterrupted as interrupted:
        return report_error(str(interrupted), EXIT_RUNTIME_ERROR)
    if dry_run:
        click.echo("Dry run: every object was built; nothing was trained.")
        click.echo(json.dumps(result, indent=2))
    return 0
