"""`ipuflow export ARCHIVE -o model.onnx`: the archived model's inference forward as ONNX."""

from __future__ import annotations

import json
from typing import Optional, Tuple

import click

from ipuflow.commands.cli import EXIT_RUNTIME_ERROR, debug_option, include_package_option, report_error


@click.command("export")
@click.argument("archive", metavar="ARCHIVE")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Where to write the ONNX model (e.g. model.onnx).")
@click.option("--dynamic", is_flag=True,
              help="Dynamic batch and sequence axes (default: the fixed shapes of the archived loader's batches).")
@click.option("--opset", type=click.IntRange(min=13), default=18, show_default=True, help="ONNX opset version.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Micro-batch size of the export (default: the config's).")
@click.option("--input", "input_path", type=click.Path(exists=True), metavar="DATA_FILE",
              help="Data for the sample inputs and the parity check (default: the config's validation data).")
@click.option("--tolerance", type=click.FloatRange(min=0), default=1e-4, show_default=True,
              help="Largest absolute difference from PyTorch's outputs that the parity check accepts.")
@click.option("--samples", type=click.IntRange(min=1), default=4, show_default=True,
              help="Batches of sample data the parity check compares on.")
@click.option("--exporter", type=click.Choice(["auto", "dynamo", "torchscript"]), default="auto", show_default=True,
              help="torch.onnx's torch.export-based exporter (dynamo), the TorchScript-based one, or dynamo with "
                   "TorchScript as the fallback when dynamo fails to convert or fails the parity check (auto).")
@click.option("--optimize", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              is_flag=False, flag_value="on",
              help="ONNX Runtime's transformer fusions (attention, LayerNorm, GELU of BERT-family graphs): auto "
                   "applies them where the graph has such subgraphs and the fused file passes the parity check; "
                   "on (also plain --optimize) requires the fused file to pass it; off exports the plain graph.")
@click.option("--quantize", type=click.Choice(["off", "int8"]), default="off", show_default=True,
              help="int8: store the weights of the matrix products as int8 (ONNX Runtime's dynamic quantization), "
                   "for integer kernels on the CPU; the outputs then differ from PyTorch's by more than rounding.")
@click.option("--quantized-tolerance", type=click.FloatRange(min=0), default=None,
              help="Largest difference from PyTorch's outputs accepted for an int8 file, as a fraction of each "
                   "output's largest magnitude  [default: 0.5].")
@click.option("--weights-file", type=click.Path(dir_okay=False), help="Weights to use instead of the archive's.")
@click.option("--overrides", default="", metavar="JSON", help="Edits to the archived config.")
@include_package_option
@debug_option
def export(archive: str, output: str, dynamic: bool, opset: int, batch_size: Optional[int], input_path: Optional[str],
           tolerance: float, samples: int, exporter: str, optimize: str, quantize: str, quantized_tolerance: Optional[float],
           weights_file: Optional[str], overrides: str, include_package: Tuple[str, ...]) -> int:
    """Export the model in ARCHIVE (model.tar.gz or a run directory) to ONNX and check it against PyTorch.

    The graph takes the batch keys the archived loader produces (tokens, masks, and labels, which
    may be left out at prediction) and returns the model's tensor outputs. `ipuflow evaluate` and
    `ipuflow predict` run it with `--executor onnxruntime --onnx-model FILE`.
    """
    from ipuflow.distributed.launch import refuse_under_torchrun

    refuse_under_torchrun("ipuflow export")

    from ipuflow.config.requirements import ONNX, require_packages

    require_packages("ipuflow export", *ONNX)

    from ipuflow.plugins import include_packages
    from ipuflow.experiment.serialization_dir import configure_logging
    from ipuflow.exporting.onnx_export import ExportError, ParityError, export_archive

    configure_logging()
    include_packages(include_package)
    try:
        report = export_archive(archive, output, dynamic=dynamic, opset=opset, batch_size=batch_size,
                                input_path=input_path, tolerance=tolerance, samples=samples, weights_file=weights_file,
                                exporter=exporter, optimize=optimize, overrides=overrides, quantize=quantize,
                                quantized_tolerance=quantized_tolerance)
    except (ExportError, ParityError) as error:
        return report_error(str(error), EXIT_RUNTIME_ERROR)
    click.echo(json.dumps(report.summary(), indent=2))
    worst = max(report.max_abs_diff.values(), default=0.0)
    click.echo(f"Exported {output} (opset {opset}, {report.record.exporter} exporter); parity with PyTorch on {report.checked_batches} batches: "
               f"max abs diff {worst:.3g} <= {tolerance:g}"
               + (f"; ONNX Runtime's transformer fusions: {report.fusions}" if report.fusions else "")
               + (f"; int8 weights: max diff {max(report.int8_relative_diff.values(), default=0.0):.3g} of the "
                  "outputs' largest magnitude"
                  if report.int8_relative_diff is not None else "") + ".")
    return 0
