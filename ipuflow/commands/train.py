"""`ipuflow train CONFIG -s DIR`: train a model from a config file."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

import click

from ipuflow.commands.cli import EXIT_CONFIG_ERROR, debug_option, exit_code_for, include_package_option, report_error


def parse_ext_vars(pairs: Tuple[str, ...]) -> Dict[str, str]:
    """`KEY=VALUE` strings as a dict; a pair without `=` is a usage error."""
    variables = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--ext-var")
        variables[key] = value
    return variables


def saved_config_of(serialization_dir: str, recover: bool) -> str:
    """The config a run saved, which `-r` without CONFIG continues with."""
    from ipuflow.config import ConfigurationError
    from ipuflow.experiment.serialization_dir import CONFIG_NAME

    if not recover:
        raise click.UsageError("CONFIG is needed to start a run; only -r can leave it out (it continues with "
                               f"DIR/{CONFIG_NAME}, the config the run saved).")
    saved = os.path.join(serialization_dir, CONFIG_NAME)
    if not os.path.isfile(saved):
        raise ConfigurationError(f"-r without CONFIG continues with {saved}, but there is no such file, so "
                                 f"{serialization_dir} holds no run to recover. Give the config file to start one.")
    return saved


def refuse_with_compile_only(**flags: bool) -> None:
    """--compile-only writes nothing to DIR, so the flags about DIR's run make no sense with it."""
    given = [f"--{name.replace('_', '-')}" for name, value in flags.items() if value]
    if given:
        raise click.UsageError(f"--compile-only cannot be combined with {', '.join(given)}: it builds and compiles "
                               "in a temporary directory and neither trains nor touches the serialization directory.")


def report_compiled(report: Dict[str, Any], serialization_dir: str) -> None:
    """Print what --compile-only compiled, one line per loader on stderr, then the report as JSON on
    stdout (alone there, so that it can be piped into `jq`)."""
    for entry in report["compiled"]:
        shapes = "; ".join(", ".join(f"{key} {shape}" for key, shape in sample.items()) for sample in entry["input_shapes"])
        click.echo(f"Compiled for the {entry['loader']} loader ({entry['mode']}, {len(entry['input_shapes'])} input "
                   f"shape(s): {shapes or 'none'}): {entry['compiled']} [{entry['seconds']}s]", err=True)
    click.echo(f"Compile only: nothing was trained; {serialization_dir} was not touched.", err=True)
    click.echo(json.dumps(report, indent=2))


@click.command("train")
@click.argument("config_file", metavar="[CONFIG]", required=False)
@click.option("-s", "--serialization-dir", required=True, metavar="DIR",
              help="Directory for checkpoints, logs, metrics and the model archive.")
@click.option("-r", "--recover", is_flag=True,
              help="Continue the run in DIR from its latest checkpoint, or finish it (test evaluation, archive); "
                   "the config must be the same, except a raised trainer.num_epochs or trainer.max_steps.")
@click.option("--from-checkpoint", metavar="PATH",
              help="With -r: resume from this checkpoint of DIR (e.g. DIR/model_state_e2_b0.safetensors) instead of "
                   "the newest; what the run wrote after it is moved into DIR/superseded_N/.")
@click.option("-f", "--force", is_flag=True, help="Delete DIR's contents and start over.")
@click.option("-o", "--overrides", multiple=True, metavar="JSON",
              help='Jsonnet/JSON object of edits merged into the config, e.g. \'{"trainer.num_epochs": 3}\' '
                   '(repeatable: applied in order).')
@click.option("--dry-run", is_flag=True, help="Build every object and report the plan; train nothing.")
@click.option("--compile-only", is_flag=True,
              help="Build everything and compile the training and inference executables for every input "
                   "shape (filling the executable cache); train nothing and leave DIR untouched.")
@click.option("--file-friendly-logging", is_flag=True, help="Progress output suited to log files.")
@click.option("--ext-var", multiple=True, metavar="KEY=VALUE", help="A Jsonnet external variable (repeatable).")
@click.option("--no-cache", is_flag=True, help="Read and tokenize the data afresh instead of from the data cache.")
@include_package_option
@debug_option
def train(config_file: Optional[str], serialization_dir: str, recover: bool, force: bool, overrides: Tuple[str, ...], dry_run: bool,
          compile_only: bool, file_friendly_logging: bool, ext_var: Tuple[str, ...],
          include_package: Tuple[str, ...], no_cache: bool = False, from_checkpoint: Optional[str] = None) -> int:
    """Train the experiment in CONFIG (.jsonnet, .json or .yaml), writing everything to DIR.

    With -r, CONFIG may be left out: the run continues with the config it saved (DIR/config.json).
    """
    if no_cache:
        from ipuflow.data.columnar.cache import NO_CACHE_ENV

        os.environ[NO_CACHE_ENV] = "1"  # read by every dataset reader's cache settings
    from ipuflow.distributed import environment_rank
    from ipuflow.experiment.run import train_model_from_file
    from ipuflow.storage import RunDirectoryLocked
    from ipuflow.training.checkpoints.checkpointer import CheckpointsUnreadable
    from ipuflow.training.state.interruption import TrainingInterrupted

    if compile_only:
        refuse_with_compile_only(dry_run=dry_run, recover=recover, force=force)
    config_file = config_file or saved_config_of(serialization_dir, recover)
    try:
        result = train_model_from_file(
            config_file, serialization_dir, overrides=overrides, recover=recover, force=force, dry_run=dry_run,
            include_package=include_package, ext_vars=parse_ext_vars(ext_var),
            file_friendly_logging=file_friendly_logging, compile_only=compile_only, from_checkpoint=from_checkpoint,
        )
    except (TrainingInterrupted, RunDirectoryLocked, CheckpointsUnreadable) as stopped:
        # Each says what happened and what to do next in one paragraph: no exception name, no traceback.
        # A directory in use by another process is a usage conflict, like any refused -s; a signal
        # exits as shells report it (130 for SIGINT).
        code = EXIT_CONFIG_ERROR if isinstance(stopped, RunDirectoryLocked) else exit_code_for(stopped)
        if environment_rank() != 0:
            return code  # under torchrun every rank stops alike, and rank 0 says so for the group
        return report_error(str(stopped), code)
    if compile_only:
        report_compiled(result, serialization_dir)
    if dry_run:
        # stdout is the report alone, so that it can be piped into `jq` or `python -m json.tool`.
        click.echo("Dry run: every object was built and one training step tried; nothing was trained.", err=True)
        click.echo(json.dumps(result, indent=2))
    return 0
