"""`ipuflow evaluate ARCHIVE INPUT`: score an archived model on one or more data files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Tuple, Union

import click

from ipuflow.commands.cli import debug_option, include_package_option, inference_executor_options


def evaluate_archive(archive_path: str, input_paths: List[str], batch_size: Optional[int] = None,
                     device: Optional[str] = None, overrides: str = "", weights_file: Optional[str] = None,
                     predictions_file: Optional[TextIO] = None, executor_type: Optional[str] = None,
                     onnx_model: Optional[str] = None) -> Dict[str, Any]:
    """Metrics of the archived model on each input (keys prefixed by file stem when several)."""
    from ipuflow.experiment.archive.archival import load_archive

    archive = load_archive(archive_path, overrides=overrides, weights_file=weights_file)
    return evaluate_loaded_archive(archive, input_paths, batch_size, device, predictions_file, executor_type, onnx_model)


def evaluate_loaded_archive(archive: Any, input_paths: List[str], batch_size: Optional[int] = None,
                            device: Optional[str] = None,
                            predictions_file: Optional[Union[TextIO, str, Path]] = None,
                            executor_type: Optional[str] = None, onnx_model: Optional[str] = None) -> Dict[str, Any]:
    """Metrics of a loaded `Archive`'s model on each input (keys prefixed by file stem when several).

    Whatever else the archive's config names (executor, data loader, postprocessor) is built under
    the archive's import policy, as its model was. Predictions (one JSON line per instance) go to
    `predictions_file`, a stream or a path, once every input has been evaluated: a failure leaves
    no partial file.
    """
    with archive.import_policy.applied():
        metrics, lines = _evaluate(archive, input_paths, batch_size, device, executor_type, onnx_model,
                                   keep_predictions=predictions_file is not None)
    if isinstance(predictions_file, (str, Path)):
        with open(predictions_file, "w") as handle:
            handle.writelines(lines)
    elif predictions_file is not None:
        predictions_file.writelines(lines)
    return metrics


def _evaluate(archive: Any, input_paths: List[str], batch_size: Optional[int], device: Optional[str],
              executor_type: Optional[str], onnx_model: Optional[str], keep_predictions: bool) -> Tuple[Dict[str, Any], List[str]]:
    from ipuflow.config import ConfigurationError, Params
    from ipuflow.evaluation.evaluator import split_rows
    from ipuflow.evaluation.example_scoring import ExampleScoring, evaluate_examples
    from ipuflow.evaluation.inference import inference_executor_from_config, loader_from_config
    from ipuflow.evaluation.postprocessor import Postprocessor
    from ipuflow.experiment.vocabulary_sources import refuse_labels_the_model_lacks

    model, config = archive.model, archive.config
    executor = inference_executor_from_config(config, model, device, executor_type, onnx_model)
    postprocessor_params = config.get("postprocessor")
    postprocessor = (Postprocessor.from_params(postprocessor_params.duplicate(), vocab=archive.vocab)
                     if isinstance(postprocessor_params, Params) else None)
    all_metrics: Dict[str, Any] = {}
    lines: List[str] = []
    for path in input_paths:
        # Read in batches into a (cached) columnar dataset, as training reads; metadata only for a postprocessor.
        dataset = archive.validation_dataset_reader.read_columnar(path, metadata=postprocessor is not None)
        if not len(dataset):
            raise ConfigurationError(f"{path} holds no instances: there is nothing to evaluate.")
        refuse_labels_the_model_lacks(dataset, path, archive.vocab)
        loader = loader_from_config(config, dataset.indexed(archive.vocab), batch_size,
                                    archive.validation_dataset_reader.batch_transform())
        executor.prepare(loader)
        if postprocessor is not None:
            examples = ExampleScoring(postprocessor, dataset.instances(), model)
            metrics = evaluate_examples(model, executor, loader, examples)
            predictions = examples.predictions
        else:
            outputs: List[Dict[str, Any]] = []

            def keep(batch_outputs: Any, batch: Any) -> None:
                readable = model.make_output_human_readable(dict(batch_outputs))
                outputs.extend(split_rows(readable, next(iter(batch.values())).shape[0]))

            metrics = evaluate_examples(model, executor, loader, on_outputs=keep if keep_predictions else None)
            predictions = outputs[: len(dataset)]  # the rest padded the last combined batch
        if keep_predictions:
            from ipuflow.predictors.predictor import to_jsonable

            lines.extend(json.dumps(to_jsonable(prediction)) + "\n" for prediction in predictions)
        prefix = f"{Path(path).stem}_" if len(input_paths) > 1 else ""
        all_metrics.update({f"{prefix}{key}": value for key, value in metrics.items()})
    return all_metrics, lines


@click.command("evaluate")
@click.argument("archive", metavar="ARCHIVE")
@click.argument("input_paths", metavar="INPUT")
@click.option("--output-file", type=click.Path(dir_okay=False), help="Write the metrics as JSON here.")
@click.option("--predictions-output-file", type=click.Path(dir_okay=False),
              help="Write one JSON line of human-readable outputs per instance here.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Micro-batch size (default: the config's).")
@click.option("--device", help="Device for the native executor, e.g. cpu or cuda:0.")
@inference_executor_options
@click.option("-o", "--overrides", default="", metavar="JSON", help="Edits to the archived config.")
@click.option("--weights-file", type=click.Path(dir_okay=False), help="Weights to use instead of the archive's.")
@include_package_option
@debug_option
def evaluate(archive: str, input_paths: str, output_file: Optional[str], predictions_output_file: Optional[str],
             batch_size: Optional[int], device: Optional[str], executor_type: Optional[str], onnx_model: Optional[str],
             overrides: str, weights_file: Optional[str], include_package: Tuple[str, ...]) -> None:
    """Score the model in ARCHIVE (model.tar.gz or a run directory) on INPUT (comma-separated paths)."""
    from ipuflow.distributed.launch import refuse_under_torchrun

    refuse_under_torchrun("ipuflow evaluate")

    from ipuflow.experiment.archive.archival import load_archive
    from ipuflow.plugins import include_packages
    from ipuflow.experiment.serialization_dir import configure_logging
    from ipuflow.predictors.predictor import to_jsonable
    from ipuflow.storage import write_json_atomically

    configure_logging()
    include_packages(include_package)
    paths = [path.strip() for path in input_paths.split(",") if path.strip()]
    loaded = load_archive(archive, overrides=overrides, weights_file=weights_file)
    metrics = evaluate_loaded_archive(loaded, paths, batch_size, device, predictions_output_file,
                                      executor_type, onnx_model)
    printable = to_jsonable(metrics)  # a NaN metric (e.g. the loss of NaN weights) as null: bare NaN is not JSON
    click.echo(json.dumps(printable, indent=2, allow_nan=False))
    if output_file:
        write_json_atomically(Path(output_file), printable)
