"""`ipuflow export` to ONNX, its parity check, and the onnxruntime executor behind evaluate/predict."""

import json

import pytest
import torch

from ipuflow.experiment.archive.archival import load_archive
from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError
from ipuflow.exporting.onnx_export import ExportError, ParityError, check_parity, export_model
from ipuflow.execution.onnx_metadata import read_record

from tests.experiment.conftest import make_examples, write_jsonl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    """The tiny run exported with fixed shapes and with dynamic axes."""
    folder = tmp_path_factory.mktemp("onnx")
    fixed, dynamic = folder / "fixed.onnx", folder / "dynamic.onnx"
    assert run(["export", str(trained_run), "-o", str(fixed)]) == 0
    assert run(["export", str(trained_run), "-o", str(dynamic), "--dynamic", "--opset", "17"]) == 0
    return fixed, dynamic


def test_export_records_the_input_spec_opset_and_parity(exported):
    fixed, dynamic = exported
    record = read_record(str(fixed))
    # The archived loader's batches: micro-batch 4, max_length 8; labels optional (left out at prediction).
    assert [(item.name, item.dtype, item.shape, item.optional) for item in record.inputs] == [
        ("tokens", "int64", [4, 8], False), ("tokens_mask", "bool", [4, 8], False), ("label", "int64", [4], True)]
    assert record.outputs == ["logits", "probs", "loss"] and record.opset == 18 and not record.dynamic
    assert 0 <= max(record.parity["max_abs_diff"].values()) <= record.parity["tolerance"] == 1e-4
    dynamic_record = read_record(str(dynamic))
    assert dynamic_record.opset == 17 and dynamic_record.dynamic
    assert [item.shape for item in dynamic_record.inputs] == [["batch", "sequence"], ["batch", "sequence"], ["batch"]]
    import onnx

    assert onnx.load(str(dynamic)).opset_import[0].version == 17


def evaluate(archive, data, tmp_path, name, *extra):
    output = tmp_path / f"{name}.json"
    predictions = tmp_path / f"{name}.jsonl"
    assert run(["evaluate", str(archive), str(data), "--output-file", str(output),
                "--predictions-output-file", str(predictions), *extra]) == 0
    return json.loads(output.read_text()), [json.loads(line) for line in predictions.read_text().splitlines()]


def test_evaluate_with_onnxruntime_gives_pytorchs_metrics_and_outputs(trained_run, tiny_data, exported, tmp_path):
    fixed, dynamic = exported
    data = tiny_data / "test.jsonl"
    reference, reference_rows = evaluate(trained_run, data, tmp_path, "torch")
    for name, extra in (("fixed", ["--onnx-model", str(fixed)]),
                        ("dynamic", ["--onnx-model", str(dynamic), "--batch-size", "3"])):
        metrics, rows = evaluate(trained_run, data, tmp_path, name, "--executor", "onnxruntime", *extra)
        assert metrics["accuracy"] == reference["accuracy"]
        assert metrics["loss"] == pytest.approx(reference["loss"], abs=1e-5)
        assert [row["label"] for row in rows] == [row["label"] for row in reference_rows]
        for row, expected in zip(rows, reference_rows):
            assert row["probs"] == pytest.approx(expected["probs"], abs=1e-5)


def test_predict_with_onnxruntime_fills_the_missing_label(trained_run, exported, tmp_path, capsys):
    fixed, _ = exported
    inputs = write_jsonl(tmp_path / "inputs.jsonl", [{"text": row["text"]} for row in make_examples(7, seed=5)])
    assert run(["predict", str(trained_run), str(inputs)]) == 0
    reference = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert run(["predict", str(trained_run), str(inputs), "--executor", "onnxruntime", "--onnx-model", str(fixed)]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(got) == len(reference) == 7
    for row, expected in zip(got, reference):
        assert row["label"] == expected["label"]
        assert list(row["probs"].values()) == pytest.approx(list(expected["probs"].values()), abs=1e-5)


def test_a_fixed_shape_file_refuses_another_batch_size_and_other_weights(trained_run, tiny_data, exported, capsys):
    fixed, _ = exported
    code = run(["evaluate", str(trained_run), str(tiny_data / "test.jsonl"), "--executor", "onnxruntime",
                "--onnx-model", str(fixed), "--batch-size", "3"])
    assert code == 2  # bad input, not an environment failure
    err = capsys.readouterr().err
    assert "Shape mismatch for tokens" in err and "--dynamic" in err and "ValueError" not in err
    assert run(["evaluate", str(trained_run), str(tiny_data / "test.jsonl"), "--executor", "onnxruntime"]) == 2
    assert "--onnx-model" in capsys.readouterr().err
    from ipuflow.execution.onnxruntime_executor import OnnxRuntimeExecutor

    archive = load_archive(trained_run)
    with torch.no_grad():
        archive.model.output.bias.add_(1.0)
    with pytest.raises(ConfigurationError, match="exported from other weights"):
        OnnxRuntimeExecutor(archive.model, str(fixed), training=False)
    with pytest.raises(ConfigurationError, match="inference only"):
        OnnxRuntimeExecutor(archive.model, str(fixed))


@torch.library.custom_op("ipuflow_test::scramble", mutates_args=())
def scramble(values: torch.Tensor) -> torch.Tensor:
    return values.flip(-1)


@scramble.register_fake
def _scramble_shape(values):
    return torch.empty_like(values)


class Scrambler(torch.nn.Module):
    def __init__(self, noisy=False):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.noisy = noisy

    def forward(self, features):
        if self.noisy:  # randomness in eval mode: the exported graph cannot match
            return {"logits": self.linear(features) + torch.rand(features.shape[0], 2)}
        return {"logits": scramble(self.linear(features))}


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_an_unexportable_operation_is_named(tmp_path, exporter):
    with pytest.raises(ExportError) as error:
        export_model(Scrambler(), {"features": torch.randn(3, 4)}, tmp_path / "model.onnx", exporter=exporter)
    assert "ipuflow_test" in str(error.value) and "scramble" in str(error.value)
    assert "Scrambler" in str(error.value)


def test_a_parity_failure_is_an_error_with_the_difference(tmp_path):
    model, batch = Scrambler(noisy=True), {"features": torch.randn(3, 4)}
    record = export_model(model, batch, tmp_path / "model.onnx", exporter="dynamo")
    with pytest.raises(ParityError, match="max abs diff"):
        check_parity(model, tmp_path / "model.onnx", [batch], record, tolerance=1e-6)
