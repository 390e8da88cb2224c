"""`ipuflow predict ARCHIVE INPUT|-`: run an archived model on JSON-lines inputs."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, List, Optional, TextIO, Tuple

import click

from ipuflow.commands.cli import (
    EXIT_RUNTIME_ERROR, debug_option, include_package_option, inference_executor_options, report_error,
)

if TYPE_CHECKING:
    from ipuflow.predictors.batch_prediction import BatchPredictor


@click.command("predict")
@click.argument("archive", metavar="ARCHIVE")
@click.argument("input_file", metavar="INPUT")
@click.option("--output-file", type=click.Path(dir_okay=False), help="Write predictions here (default: stdout).")
@click.option("--batch-size", type=click.IntRange(min=1), help="Micro-batch size (default: the config's).")
@click.option("--predictor", "predictor_name", help="A registered Predictor (default: the model's own).")
@click.option("--predictor-args", default="{}", metavar="JSON", help="Extra arguments for the predictor, as JSON.")
@click.option("--silent", is_flag=True, help="Do not echo predictions to stdout when writing --output-file.")
@click.option("--use-dataset-reader", is_flag=True,
              help="Read INPUT as a data file with the archive's dataset reader instead of as JSON lines.")
@click.option("--skip-bad-lines", is_flag=True, help="Log malformed input lines and go on instead of stopping.")
@click.option("--device", help="Device for the native executor, e.g. cpu or cuda:0.")
@inference_executor_options
@click.option("-o", "--overrides", default="", metavar="JSON", help="Edits to the archived config.")
@include_package_option
@debug_option
def predict(archive: str, input_file: str, output_file: Optional[str], batch_size: Optional[int],
            predictor_name: Optional[str], predictor_args: str, silent: bool, use_dataset_reader: bool,
            skip_bad_lines: bool, device: Optional[str], executor_type: Optional[str], onnx_model: Optional[str],
            overrides: str, include_package: Tuple[str, ...]) -> int:
    """Predict each JSON line of INPUT ('-' for stdin) with the model in ARCHIVE; JSON lines out."""
    from ipuflow.distributed.launch import refuse_under_torchrun

    refuse_under_torchrun("ipuflow predict")

    from ipuflow.experiment.archive.archival import load_archive
    from ipuflow.config import ConfigurationError, Params
    from ipuflow.plugins import include_packages
    from ipuflow.evaluation.inference import inference_executor_from_config
    from ipuflow.evaluation.postprocessor import Postprocessor
    from ipuflow.experiment.serialization_dir import configure_logging
    from ipuflow.predictors.batch_prediction import BatchPredictor
    from ipuflow.predictors.predictor import Predictor

    configure_logging()
    include_packages(include_package)
    try:
        extra_args = json.loads(predictor_args)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"--predictor-args: not valid JSON ({error.msg}).") from None
    if not isinstance(extra_args, dict):
        raise ConfigurationError("--predictor-args: expected a JSON object such as '{\"top_k\": 2}'.")
    loaded = load_archive(archive, overrides=overrides)
    name = predictor_name or getattr(loaded.model, "default_predictor", None)
    if name is None:
        raise ConfigurationError(f"{type(loaded.model).__name__} names no default predictor; pass --predictor NAME.")
    # The executor and the (lazily built) loaders come from the archive's config too.
    with loaded.import_policy.applied():
        predictor = Predictor.from_params(Params({"type": name, **extra_args}, history="predictor."),
                                          model=loaded.model, dataset_reader=loaded.validation_dataset_reader)
        executor = inference_executor_from_config(loaded.config, loaded.model, device, executor_type, onnx_model)
        postprocessor_params = loaded.config.get("postprocessor")
        postprocessor = (Postprocessor.from_params(postprocessor_params.duplicate(), vocab=loaded.vocab)
                         if isinstance(postprocessor_params, Params) else None)
        runner = BatchPredictor(predictor, executor, loaded.config, loaded.vocab, batch_size, postprocessor)
        return _predict_all(runner, loaded, input_file, output_file, silent, use_dataset_reader, skip_bad_lines)


def _predict_all(runner: "BatchPredictor", loaded: Any, input_file: str, output_file: Optional[str], silent: bool,
                 use_dataset_reader: bool, skip_bad_lines: bool) -> int:
    """Write one prediction per input of `input_file`; the exit code."""
    from ipuflow.data.readers.text_lines import utf8_stream_lines
    from ipuflow.predictors.batch_prediction import BadInputLine, predict_lines
    from ipuflow.predictors.predictor import to_jsonable

    # The output file is opened at the first prediction: the data loader is built from the archive's
    # config only then, and a config error there must leave no file behind.
    opened: List[TextIO] = []

    def write(prediction: dict) -> None:
        line = json.dumps(to_jsonable(prediction), allow_nan=False)  # NaN as null: bare NaN is not JSON
        if output_file:
            if not opened:
                opened.append(open(output_file, "w"))
            opened[0].write(line + "\n")
        if not output_file or not silent:
            click.echo(line)

    try:
        if use_dataset_reader:
            # Read in batches into a (cached) columnar dataset, as training and evaluation read.
            postprocessing = runner.postprocessor is not None
            dataset = loaded.validation_dataset_reader.read_columnar(input_file, metadata=postprocessing)
            instances = dataset.instances() if postprocessing else None
            for prediction in runner.predict_dataset(dataset.indexed(loaded.vocab), instances):
                write(prediction)
        else:
            refuse_missing_input(input_file)
            # Decoded as UTF-8 line by line from stdin and files alike: other bytes are an error naming the line.
            stream = getattr(sys.stdin, "buffer", None) if input_file == "-" else open(input_file, "rb")
            try:
                # A stdin without bytes underneath (replaced by a program that runs this command) is text already.
                lines = sys.stdin if stream is None else utf8_stream_lines(stream, "stdin" if input_file == "-" else input_file)
                predict_lines(runner, lines, write, skip_bad_lines=skip_bad_lines)
            except BadInputLine as bad:
                return report_error(f"{bad} (earlier lines were predicted; --skip-bad-lines goes on past bad lines)",
                                    EXIT_RUNTIME_ERROR)
            finally:
                if input_file != "-" and stream is not None:
                    stream.close()
        if output_file and not opened:
            opened.append(open(output_file, "w"))  # no inputs: an empty output file
    finally:
        for handle in opened:
            handle.close()
    return 0


def refuse_missing_input(input_file: str) -> None:
    """A clear error for an INPUT that is not a readable file ('-' is stdin)."""
    from ipuflow.config import ConfigurationError

    if input_file == "-":
        return
    if os.path.isdir(input_file):
        raise ConfigurationError(f"Input {input_file!r} is a directory; give a JSON-lines file, or '-' for stdin "
                                 "(the archive or run directory comes first: ipuflow predict ARCHIVE INPUT).")
    if not os.path.isfile(input_file):
        raise ConfigurationError(f"Input file {input_file!r} does not exist.")
