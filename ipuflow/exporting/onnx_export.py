"""`ipuflow export`: an archived model's inference forward as ONNX, checked against PyTorch."""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution.onnx_metadata import METADATA_KEY, OnnxInput, OnnxRecord, weights_digest
from ipuflow.exporting.staged_output import publish, staged_output
from ipuflow.torch_features import DYNAMO_ONNX_EXPORT, ONNX_EXPORTER_CHOICE, require_torch, torch_at_least

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 18
"""The opset the torch.export-based exporter emits natively (no version conversion step), and one
that ONNX Runtime has long supported fully."""

DEFAULT_TOLERANCE = 1e-4
EXTERNAL_DATA_BYTES = 1_500_000_000
"""Above this size the weights go to a side file (a single ONNX protobuf is limited to 2 GB)."""


class ExportError(RuntimeError):
    """The model's forward cannot be exported; the message names the operation when one is at fault."""


class ParityError(RuntimeError):
    """The exported model's outputs differ from PyTorch's by more than the tolerance."""


@dataclass
class ExportReport:
    """What an export did: the file, its record, the parity check's largest differences per output."""

    path: Path
    record: OnnxRecord
    max_abs_diff: Dict[str, float]
    checked_batches: int
    fallback_from: List[str]
    fusions: Optional[Dict[str, int]] = None
    int8_relative_diff: Optional[Dict[str, float]] = None
    """With int8 weights: the quantized file's largest differences from PyTorch per output, as a
    fraction of the output's largest magnitude."""

    def summary(self) -> Dict[str, Any]:
        """A JSON-able summary for the command line."""
        return {
            "path": str(self.path),
            "opset": self.record.opset,
            "exporter": self.record.exporter,
            "fallback_from": self.fallback_from,
            "dynamic": self.record.dynamic,
            "inputs": [{"name": item.name, "dtype": item.dtype, "shape": item.shape} for item in self.record.inputs],
            "outputs": self.record.outputs,
            "parity_batches": self.checked_batches,
            "max_abs_diff": self.max_abs_diff,
            "transformer_fusions": self.fusions or {},
            "weights": "int8" if self.int8_relative_diff is not None else "float",
            **({"int8_max_relative_diff": self.int8_relative_diff} if self.int8_relative_diff is not None
               else {}),
        }


class ForwardByPosition(torch.nn.Module):
    """The model's forward with positional tensor inputs and a tuple of tensor outputs, as the exporter
    needs them; `input_names` and `output_names` map positions to the batch's and outputs' keys."""

    def __init__(self, model: torch.nn.Module, input_names: Sequence[str], output_names: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def forward(self, *inputs: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        outputs = self.model(**dict(zip(self.input_names, inputs)))
        return tuple(outputs[name] for name in self.output_names)


def sample_batches(archive: Any, input_path: Optional[str], batch_size: Optional[int], count: int) -> List[Dict[str, torch.Tensor]]:
    """Up to `count` micro-batches of real data, batched as the inference executor's loader batches them
    (the archived loader config: fixed max_length, padding). Read from `input_path`, else the config's
    validation (or train) data."""
    from ipuflow.evaluation.inference import loader_from_config

    config = archive.config
    validation = config.get("validation_data_path")
    if isinstance(validation, dict):  # several validation sets: the first one's data
        validation = next(iter(validation.values()), None)
    path = input_path or validation or config.get("train_data_path")
    if not path:
        raise ConfigurationError("export: the archived config names no validation_data_path; pass --input DATA_FILE "
                                 "for the sample inputs.")
    if not Path(str(path)).exists():
        raise ConfigurationError(f"export: the sample data {path} does not exist; pass --input DATA_FILE.")
    instances = []
    reader = archive.validation_dataset_reader
    for instance in reader.read(str(path)):
        instances.append(instance.index(archive.vocab))
        if len(instances) >= count * (batch_size or 64):
            break
    loader = loader_from_config(config, instances, batch_size)
    batches = []
    for batch in loader:
        batches.append(dict(batch))
        if len(batches) >= count:
            break
    return batches


def _optional_inputs(model: torch.nn.Module) -> List[str]:
    """The forward's arguments that have a default (labels): a batch may lack them at prediction."""
    parameters = inspect.signature(model.forward).parameters
    return [name for name, parameter in parameters.items() if parameter.default is not inspect.Parameter.empty]


def _sequence_length(batch: Mapping[str, torch.Tensor]) -> Optional[int]:
    lengths = Counter(value.shape[1] for value in batch.values() if value.dim() >= 2)
    return lengths.most_common(1)[0][0] if lengths else None


def _dynamic_shapes(batch: Mapping[str, torch.Tensor]) -> Tuple[Dict[int, Any], ...]:
    """Batch axis (dim 0) of every input and the sequence axis (dim 1 of the inputs padded to the
    common length) as dynamic, left to torch.export to confirm (Dim.AUTO: a model that fixes one
    keeps it fixed, and the export reports the axes that stayed dynamic)."""
    from torch.export import Dim

    length = _sequence_length(batch)
    shapes = []
    for value in batch.values():
        axes: Dict[int, Any] = {0: Dim.AUTO}
        if value.dim() >= 2 and value.shape[1] == length:
            axes[1] = Dim.AUTO
        shapes.append(axes)
    return tuple(shapes)


def _operation_in(error: BaseException) -> Optional[str]:
    """The operation an exporter error is about, e.g. `aten.nonzero` or `my_ops.scramble`."""
    text = "\n".join(str(item) for item in _causes(error))
    for pattern in (r"OpOverload\(op='([^']+)'", r"target=torch\.ops\.([\w.]+?)(?:\.default)?\]", r"\b(aten::\w+)",
                    r"\btorch\.ops\.([\w]+\.[\w]+)"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    return None


def _causes(error: BaseException) -> List[BaseException]:
    chain: List[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _summary_line(error: BaseException) -> str:
    """The most specific line of an exporter error (its 'Exception summary' when it has one)."""
    text = str(error)
    summary = text.split("## Exception summary", 1)
    body = summary[1] if len(summary) == 2 else text
    lines = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith(("⬆", "(Refer"))]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[0] if lines else type(error).__name__)


# The exporters' loggers: torch.onnx's registry warns about every torchvision op it skips when
# torchvision is absent, and onnxscript's and onnx_ir's passes log each step at INFO.
_EXPORTER_LOGGERS = ("torch.onnx", "onnxscript", "onnx_ir")


@contextlib.contextmanager
def quiet_exporters() -> Iterator[None]:
    """Keep the exporters' progress chatter and FutureWarnings out of the terminal while exporting;
    their errors still reach it (ERROR and above), and a failed export is reported by ipuflow."""
    import warnings

    loggers = [logging.getLogger(name) for name in _EXPORTER_LOGGERS]
    levels = [logger_.level for logger_ in loggers]
    for logger_ in loggers:
        logger_.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        for logger_, level in zip(loggers, levels):
            logger_.setLevel(level)


def _export_proto(wrapper: ForwardByPosition, arguments: Tuple[torch.Tensor, ...], batch: Mapping[str, torch.Tensor],
                  output_names: List[str], dynamic: bool, opset: int, exporter: str) -> Any:
    """The ONNX ModelProto of `wrapper` from the torch.export-based exporter ("dynamo") or the
    TorchScript-based one ("torchscript")."""
    import warnings

    input_names = wrapper.input_names
    if exporter == "dynamo":
        with quiet_exporters():
            program = torch.onnx.export(
                wrapper, arguments, None, input_names=input_names, output_names=output_names, opset_version=opset,
                dynamo=True, dynamic_shapes={"inputs": _dynamic_shapes(batch)} if dynamic else None, verbose=False,
            )
        assert program is not None  # f=None returns the program
        return program.model_proto
    import io

    import onnx

    axes = None
    if dynamic:
        length = _sequence_length(batch)
        axes = {name: {0: "batch", **({1: "sequence"} if value.dim() >= 2 and value.shape[1] == length else {})}
                for name, value in batch.items()}
        rows = next(iter(batch.values())).shape[0]
        with torch.no_grad():
            outputs = wrapper(*arguments)
        axes.update({name: {0: "batch"} for name, value in zip(output_names, outputs) if value.dim() and value.shape[0] == rows})
    buffer = io.BytesIO()
    # Before torch 2.5 the TorchScript-based exporter is the only one, and `dynamo` no argument.
    exporter_choice: Dict[str, Any] = {"dynamo": False} if torch_at_least(ONNX_EXPORTER_CHOICE) else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # chosen on purpose, as the fallback (docs/onnx.md)
        torch.onnx.export(wrapper, arguments, buffer,  # type: ignore[arg-type]  # the TorchScript exporter takes a buffer
                          input_names=input_names, output_names=output_names,
                          opset_version=opset, dynamic_axes=axes, **exporter_choice)
    return onnx.load_from_string(buffer.getvalue())


def export_model(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], path: Union[str, Path],
                 dynamic: bool = False, opset: int = DEFAULT_OPSET, exporter: str = "dynamo") -> OnnxRecord:
    """Export `model`'s forward for inputs shaped like `batch` (or with dynamic batch and sequence axes)
    to `path` with `exporter` ("dynamo" or "torchscript"), with the ipuflow record in the file's metadata."""
    import onnx

    from ipuflow.version import VERSION

    if exporter == "dynamo":
        require_torch(DYNAMO_ONNX_EXPORT, "the torch.export-based ONNX exporter (--exporter dynamo)")
    model.eval()
    input_names = list(batch)
    with torch.no_grad():
        eager = model(**batch)
    output_names = [name for name, value in eager.items() if isinstance(value, torch.Tensor)]
    if not output_names:
        raise ExportError(f"{type(model).__name__}.forward returns no tensors to export.")
    wrapper = ForwardByPosition(model, input_names, output_names).eval()
    arguments = tuple(batch[name] for name in input_names)
    try:
        proto = _export_proto(wrapper, arguments, batch, output_names, dynamic, opset, exporter)
    except Exception as error:
        operation = _operation_in(error)
        where = f"operation {operation!r}" if operation else "its forward"
        raise ExportError(
            f"Cannot export {type(model).__name__} to ONNX ({exporter} exporter): {where} could not be exported "
            f"({_summary_line(error)}). Rewrite that part with exportable operations, or register an ONNX "
            f"translation for it."
        ) from error
    optional = set(_optional_inputs(model))
    inputs = []
    for graph_input, name in zip(proto.graph.input, input_names):
        value = batch[name]
        shape = [dim.dim_param or dim.dim_value for dim in graph_input.type.tensor_type.shape.dim]
        fill = None
        if name in optional:
            from ipuflow.data.collate import IGNORE_LABEL

            fill = IGNORE_LABEL if value.dim() == 1 and not value.is_floating_point() else 0
        inputs.append(OnnxInput(name, str(value.dtype).replace("torch.", ""), shape, name in optional, fill))
    record = OnnxRecord(
        inputs=inputs, outputs=output_names, opset=opset, dynamic=dynamic, weights_sha256=weights_digest(model),
        exporter=exporter, ipuflow_version=VERSION, torch_version=torch.__version__,
    )
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, record.to_json()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    large = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters()) > EXTERNAL_DATA_BYTES
    onnx.save_model(proto, str(path), save_as_external_data=large, location=f"{path.name}.data" if large else None)
    return record


def _name_dynamic_axes(proto: Any, batch: Mapping[str, torch.Tensor]) -> None:
    """Rename the exporter's symbolic dims (s0, s1...) to `batch` and `sequence` everywhere in the graph."""
    length = _sequence_length(batch)
    names: Dict[str, str] = {}
    for graph_input, value in zip(proto.graph.input, batch.values()):
        for axis, dim in enumerate(graph_input.type.tensor_type.shape.dim):
            if dim.dim_param and dim.dim_param not in names:
                names[dim.dim_param] = "batch" if axis == 0 else "sequence" if value.dim() >= 2 and value.shape[1] == length else dim.dim_param
    if not names:
        return
    graph = proto.graph
    for info in [*graph.input, *graph.output, *graph.value_info]:
        for dim in info.type.tensor_type.shape.dim:
            if dim.dim_param in names:
                dim.dim_param = names[dim.dim_param]


def check_parity(model: torch.nn.Module, path: Union[str, Path], batches: Sequence[Mapping[str, torch.Tensor]],
                 record: OnnxRecord, tolerance: float = DEFAULT_TOLERANCE) -> Dict[str, float]:
    """Run the ONNX file with ONNX Runtime and the model with PyTorch on `batches`; return the largest
    absolute difference per output. A difference above `tolerance` is a ParityError."""
    largest = output_differences(model, path, batches, record)
    failing = {name: diff for name, diff in largest.items() if not diff <= tolerance}
    if failing:
        raise ParityError(
            f"The exported model differs from PyTorch by more than {tolerance:g}: max abs diff {failing} "
            f"(all outputs: {largest}). Check for randomness in eval mode or reduced-precision ops, or pass a larger "
            f"--tolerance if the difference is expected."
        )
    return largest


def output_differences(model: torch.nn.Module, path: Union[str, Path], batches: Sequence[Mapping[str, torch.Tensor]],
                       record: OnnxRecord, relative: bool = False) -> Dict[str, float]:
    """The largest absolute difference per output between the ONNX file (run by ONNX Runtime) and
    the model (run by PyTorch) on `batches`; `relative`: as a fraction of the largest magnitude of
    PyTorch's values of that output."""
    from ipuflow.execution.onnxruntime_executor import OnnxSession

    session = OnnxSession(str(path), record)
    largest = {name: 0.0 for name in record.outputs}
    magnitude = {name: 0.0 for name in record.outputs}
    model.eval()
    for batch in batches:
        with torch.no_grad():
            expected = model(**batch)
        got = session.run(batch)
        for name in record.outputs:
            reference = expected[name].detach().float()
            value = got[name].float()
            if tuple(reference.shape) != tuple(value.shape):
                raise ParityError(f"ONNX output {name!r} has shape {tuple(value.shape)}, PyTorch's {tuple(reference.shape)}.")
            if reference.numel():
                largest[name] = max(largest[name], float((reference - value).abs().max()))
                magnitude[name] = max(magnitude[name], float(reference.abs().max()))
    if relative:
        return {name: diff / magnitude[name] if magnitude[name] > 0 else diff for name, diff in largest.items()}
    return largest


def parity_batches(batches: Sequence[Mapping[str, torch.Tensor]], dynamic: bool) -> List[Dict[str, torch.Tensor]]:
    """The batches to compare on: the samples and, for a dynamic export, a smaller batch and a shorter
    sequence as well, so that the dynamic axes are exercised."""
    checked = [dict(batch) for batch in batches]
    if dynamic and batches:
        first = batches[0]
        rows = max(1, next(iter(first.values())).shape[0] // 2)
        checked.append({key: value[:rows] for key, value in first.items()})
        length = _sequence_length(first)
        if length and length > 1:
            shorter = length // 2
            checked.append({key: value[:, :shorter] if value.dim() >= 2 and value.shape[1] == length else value
                            for key, value in first.items()})
    return checked


def export_archive(archive_path: str, output: Union[str, Path], dynamic: bool = False, opset: int = DEFAULT_OPSET,
                   batch_size: Optional[int] = None, input_path: Optional[str] = None,
                   tolerance: float = DEFAULT_TOLERANCE, samples: int = 4, overrides: str = "",
                   weights_file: Optional[str] = None, exporter: str = "auto", optimize: str = "auto",
                   quantize: str = "off", quantized_tolerance: Optional[float] = None) -> ExportReport:
    """Export the archived model's inference forward to `output` and check parity with PyTorch on
    `samples` batches of real data (plus a smaller batch and a shorter sequence when `dynamic`).

    `exporter` "auto" uses torch.export-based exporter and, if it cannot convert the model or its
    graph fails the parity check, the TorchScript-based one; "dynamo" or "torchscript" use only that
    one. A file that fails the check is removed.

    `optimize` ("auto", "on", "off") applies ONNX Runtime's transformer fusions to the exported graph
    (see `transformer_fusions`); the parity check then runs on the fused file.

    `quantize` "int8" then stores the weights of the matrix products as int8 (see
    `weight_quantization`): the float graph passes the parity check at `tolerance` first, then the
    int8 file at `quantized_tolerance` (default `QUANTIZED_TOLERANCE`), a fraction of each output's
    largest magnitude."""
    from ipuflow.exporting.weight_quantization import QUANTIZE_CHOICES, QUANTIZED_TOLERANCE
    from ipuflow.experiment.archive.archival import load_archive

    if quantize not in QUANTIZE_CHOICES:
        raise ConfigurationError(key="quantize", expected=f"one of {list(QUANTIZE_CHOICES)}", found=quantize)
    int8_tolerance = QUANTIZED_TOLERANCE if quantized_tolerance is None else quantized_tolerance
    archive = load_archive(archive_path, overrides=overrides, weights_file=weights_file)
    model = archive.model.cpu().eval()
    with archive.import_policy.applied():  # the loader comes from the archive's config, as its model did
        batches = sample_batches(archive, input_path, batch_size, samples)
    if not batches:
        raise ConfigurationError("export: the sample data holds no instances.")
    shapes = {tuple((key, tuple(value.shape)) for key, value in batch.items()) for batch in batches}
    if len(shapes) > 1 and not dynamic:
        raise ConfigurationError(
            "export: the loader yields batches of several shapes (length buckets), but a fixed-shape export takes "
            "one; pass --dynamic, or set a single max_length."
        )
    output = Path(output)
    checked = parity_batches(batches, dynamic)
    if exporter == "auto":
        exporters = ["dynamo", "torchscript"] if torch_at_least(DYNAMO_ONNX_EXPORT) else ["torchscript"]
    else:
        exporters = [exporter]
    with staged_output(output) as staged:
        report = _export_checked(model, batches[0], checked, staged, exporters, dynamic=dynamic, opset=opset,
                                 tolerance=tolerance, optimize=optimize, quantize=quantize, int8_tolerance=int8_tolerance)
        publish(staged, output)
    report.path = output
    return report


def _export_checked(model: torch.nn.Module, sample: Mapping[str, torch.Tensor], checked: Sequence[Mapping[str, torch.Tensor]],
                    output: Path, exporters: Sequence[str], dynamic: bool, opset: int, tolerance: float, optimize: str,
                    quantize: str, int8_tolerance: float) -> ExportReport:
    """Export to `output` with the first of `exporters` whose file passes the parity check (then the
    fusions and int8 weights asked for, each checked too); a file that fails is removed."""
    failures: List[str] = []
    for index, name in enumerate(exporters):
        last = index == len(exporters) - 1
        try:
            record = export_model(model, sample, output, dynamic=dynamic, opset=opset, exporter=name)
            fusions, fused_differences = _fuse(model, output, checked, record, tolerance, optimize)
            differences = fused_differences or check_parity(model, output, checked, record, tolerance)
        except (ExportError, ParityError) as error:
            output.unlink(missing_ok=True)
            if last:
                if failures:
                    raise type(error)(f"{error} (before that: {'; '.join(failures)})") from error
                raise
            failures.append(f"{name} exporter: {error}")
            logger.warning("export: the %s exporter failed (%s); trying the %s exporter.", name, error, exporters[index + 1])
            continue
        record.parity = {"max_abs_diff": differences, "tolerance": tolerance, "fallback_from": failures,
                         "transformer_fusions": fusions}
        quantized = None
        if quantize == "int8":  # once the float graph passed: another exporter would not quantize better
            quantized = _quantize(model, output, checked, record, int8_tolerance)
            record.parity["int8_weights"] = {"max_relative_diff": quantized, "relative_tolerance": int8_tolerance}
        _rewrite_record(output, record)
        return ExportReport(output, record, differences, len(checked), failures, fusions, quantized)
    raise AssertionError("unreachable")


def _fuse(model: torch.nn.Module, output: Path, checked: Sequence[Mapping[str, torch.Tensor]], record: OnnxRecord,
          tolerance: float, optimize: str) -> Tuple[Dict[str, int], Optional[Dict[str, float]]]:
    """Replace `output` with its transformer-fused form when `optimize` asks for it and the fused file
    passes the parity check: (the fused operators' counts, the fused file's parity differences), or
    ({}, None) when `output` stays the plain export."""
    from ipuflow.exporting.transformer_fusions import OPTIMIZE_CHOICES, fuse_transformer_operators, replace_with

    if optimize not in OPTIMIZE_CHOICES:
        raise ConfigurationError(key="optimize", expected=f"one of {list(OPTIMIZE_CHOICES)}", found=optimize)
    if optimize == "off":
        return {}, None
    staging = output.parent / f".{output.name}.fusing"
    fused_file = staging / output.name
    try:
        fusions = fuse_transformer_operators(output, fused_file, _needs_external_data(model))
        if not fusions:
            logger.info("export: no transformer subgraph for ONNX Runtime's fusions; the graph stays as exported.")
            return {}, None
        try:
            differences = check_parity(model, fused_file, checked, record, tolerance)
        except ParityError as error:
            if optimize == "on":
                raise ParityError(f"With ONNX Runtime's transformer fusions ({fusions}): {error}") from error
            logger.warning("export: the graph with ONNX Runtime's transformer fusions fails the parity check (%s); "
                           "keeping the graph as exported.", error)
            return {}, None
        replace_with(fused_file, output)
        return fusions, differences
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _needs_external_data(model: torch.nn.Module) -> bool:
    """Whether the model's weights are too large for one ONNX protobuf."""
    return sum(parameter.numel() * parameter.element_size() for parameter in model.parameters()) > EXTERNAL_DATA_BYTES


def _quantize(model: torch.nn.Module, output: Path, checked: Sequence[Mapping[str, torch.Tensor]], record: OnnxRecord,
              tolerance: float) -> Dict[str, float]:
    """Replace `output` with its int8-weight form, whose outputs must stay within `tolerance` of
    PyTorch's, as a fraction of each output's largest magnitude: those fractions per output."""
    from ipuflow.exporting.transformer_fusions import replace_with
    from ipuflow.exporting.weight_quantization import quantize_weights

    staging = output.parent / f".{output.name}.quantizing"
    quantized_file = staging / output.name
    try:
        quantize_weights(output, quantized_file, _needs_external_data(model))
        differences = output_differences(model, quantized_file, checked, record, relative=True)
        failing = {name: round(diff, 4) for name, diff in differences.items() if not diff <= tolerance}
        if failing:
            raise ParityError(
                f"With int8 weights the outputs differ from PyTorch's by more than {tolerance:g} of their largest "
                f"magnitude: {failing} (all outputs: { {name: round(diff, 4) for name, diff in differences.items()} }). "
                "Keep float weights, or accept more with --quantized-tolerance after comparing the metrics."
            )
        replace_with(quantized_file, output)
        return differences
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _rewrite_record(path: Path, record: OnnxRecord) -> None:
    """Put the record (now with the parity figures) into the saved file."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    for entry in proto.metadata_props:
        if entry.key == METADATA_KEY:
            entry.value = record.to_json()
    onnx.save_model(proto, str(path))
