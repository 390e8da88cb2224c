"""The `ipuflow` command group and the error handling every subcommand shares.

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error. Errors print one
paragraph to stderr; `--debug` (or IPUFLOW_DEBUG=1) adds the traceback.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import traceback
from typing import Any, List, Optional

import click

from ipuflow.debug_mode import debug_enabled, enable_debug
from ipuflow.version import VERSION

EXIT_RUNTIME_ERROR = 1
EXIT_CONFIG_ERROR = 2



def _enable_debug(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        enable_debug()
    return value


debug_option = click.option(
    "--debug", is_flag=True, expose_value=False, is_eager=True, callback=_enable_debug,
    help="Show tracebacks for errors.",
)
include_package_option = click.option(
    "--include-package", "include_package", multiple=True, metavar="PACKAGE",
    help="Import PACKAGE and its submodules so their components register (repeatable).",
)



def inference_executor_options(command: Any) -> Any:
    """`--executor onnxruntime` and `--onnx-model FILE`, for the commands that run an archived model."""
    command = click.option("--onnx-model", type=click.Path(dir_okay=False),
                           help="The ONNX file (from `ipuflow export`) for --executor onnxruntime.")(command)
    return click.option("--executor", "executor_type", type=click.Choice(["onnxruntime"]),
                        help="Run --onnx-model with ONNX Runtime instead of the archive's executor.")(command)


class _LazyGroup(click.Group):
    """A group whose subcommands are imported only when run, so `--help` stays fast."""

    _commands = {
        "train": ("ipuflow.commands.train", "train", "Train a model from a config file."),
        "evaluate": ("ipuflow.commands.evaluate", "evaluate", "Score an archived model on a dataset."),
        "predict": ("ipuflow.commands.predict", "predict", "Run an archived model on JSON-lines inputs."),
        "tune": ("ipuflow.commands.tune", "tune", "Search hyperparameters with optuna, one training run per trial."),
        "export": ("ipuflow.commands.export", "export", "Export an archived model to ONNX and check it against PyTorch."),
        "export-pretrained": ("ipuflow.commands.export_pretrained", "export_pretrained",
                              "Write an archived transformers model as a save_pretrained directory."),
        "components": ("ipuflow.commands.components", "components", "List registered components and their config keys."),
        "cache": ("ipuflow.commands.cache", "cache", "List or clean the data cache of tokenized datasets."),
    }

    def list_commands(self, ctx: click.Context) -> List[str]:
        return list(self._commands)

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name not in self._commands:
            return None
        module_name, attribute, _ = self._commands[name]
        import importlib

        return getattr(importlib.import_module(module_name), attribute)

    def resolve_command(self, ctx: click.Context, args: List[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in self._commands:
            # Imported here: the config layer is not needed for `--help`.
            from ipuflow.config.errors import did_you_mean

            ctx.fail(f"No such command {name!r}.{did_you_mean(name, self._commands)}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, _, help_text) in self._commands.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, "--version", prog_name="ipuflow")
@debug_option
def cli() -> None:
    """ipuflow: config-driven training on CPU, CUDA and Graphcore IPUs.

    Every experiment is one Jsonnet (or JSON/YAML) file: `ipuflow train config.jsonnet -s RUN_DIR`
    builds everything it names and trains; `ipuflow evaluate` and `ipuflow predict` work from the
    archive it leaves.
    """


def report_error(message: str, exit_code: int) -> int:
    """Print `message` as one wrapped paragraph on stderr and return `exit_code`."""
    width = min(100, max(60, shutil.get_terminal_size((100, 24)).columns))
    from ipuflow.distributed.rank_output import error_prefix

    # Never break inside a word: a path or a command in the message must survive copy and paste.
    paragraph = textwrap.fill(error_prefix() + " ".join(message.split()), width=width, subsequent_indent="  ",
                              break_on_hyphens=False, break_long_words=False)
    click.echo(f"ipuflow: error: {paragraph}", err=True)
    return exit_code


def _reports(error: BaseException) -> bool:
    """Whether this process prints `error` (under torchrun, rank 0 alone prints what every rank has)."""
    from ipuflow.distributed.rank_output import reports_error  # imports torch: only once something failed

    return reports_error(error)


def run(argv: Optional[List[str]] = None) -> int:
    """Run the command line on `argv` (default: sys.argv[1:]) and return the exit code."""
    from ipuflow.config.errors import ConfigurationError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="ipuflow", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_RUNTIME_ERROR
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except ConfigurationError as error:
        if not _reports(error):
            return EXIT_CONFIG_ERROR
        if debug_enabled():
            traceback.print_exc()
        return report_error(str(error), EXIT_CONFIG_ERROR)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except Exception as error:  # every other failure: one paragraph, traceback on request
        exit_code = exit_code_for(error)
        if not _reports(error):
            return exit_code
        if debug_enabled():
            traceback.print_exc()
            return exit_code
        hint = " (run with --debug for the traceback)"
        return report_error(f"{type(error).__name__}: {error}{hint}", exit_code)


def exit_code_for(error: BaseException) -> int:
    """128 + the signal's number for a command a signal stopped (130 for SIGINT, 143 for SIGTERM, as
    shells report them), else the runtime-failure code."""
    import signal

    name = getattr(error, "signal_name", None)
    number = getattr(signal, name, None) if isinstance(name, str) and name.startswith("SIG") else None
    return 128 + int(number) if number is not None else EXIT_RUNTIME_ERROR
