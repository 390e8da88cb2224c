"""`ipuflow export --quantize int8`: int8 weights for ONNX Runtime's integer kernels, checked against
PyTorch at their own tolerance, and run by `evaluate --executor onnxruntime`."""

import json

import onnx
import pytest

from ipuflow.commands.cli import run
from ipuflow.execution.onnx_metadata import read_record
from ipuflow.exporting.onnx_export import check_parity, export_model
from ipuflow.exporting.weight_quantization import quantize_weights
from tests.exporting.test_transformer_fusions import TinyBert, operators, tiny_batch


def test_int8_weights_of_a_transformer_run_integer_matrix_products_close_to_pytorch(tmp_path):
    model, batch = TinyBert(), tiny_batch()
    plain, quantized = tmp_path / "plain.onnx", tmp_path / "int8" / "plain.onnx"
    record = export_model(model, batch, plain, exporter="dynamo")
    quantize_weights(plain, quantized, large=False)
    assert "MatMulInteger" in operators(quantized) and "MatMulInteger" not in operators(plain)
    int8_weights = [tensor for tensor in onnx.load(str(quantized)).graph.initializer if tensor.data_type == onnx.TensorProto.INT8]
    assert len(int8_weights) >= 4  # at least the attention and feed-forward matrices of both layers
    assert max(check_parity(model, quantized, [batch], record, tolerance=0.1).values()) <= 0.1
    assert read_record(str(quantized)).weights_sha256 == record.weights_sha256  # the ipuflow record survives


def test_export_quantize_int8_records_its_parity_and_evaluates_like_pytorch(trained_run, tiny_data, tmp_path, capsys):
    output = tmp_path / "model.onnx"
    assert run(["export", str(trained_run), "-o", str(output), "--quantize", "int8"]) == 0
    record = read_record(str(output))
    int8 = record.parity["int8_weights"]
    assert int8["relative_tolerance"] == 0.5 and max(int8["max_relative_diff"].values()) <= 0.5
    assert max(record.parity["max_abs_diff"].values()) <= record.parity["tolerance"]  # the float graph passed first
    assert "MatMulInteger" in operators(output)
    assert not any(path.name.startswith(".") for path in tmp_path.iterdir())  # no staging folder left

    capsys.readouterr()
    data = str(tiny_data / "test.jsonl")
    assert run(["evaluate", str(trained_run), data, "--output-file", str(tmp_path / "pytorch.json")]) == 0
    assert run(["evaluate", str(trained_run), data, "--executor", "onnxruntime", "--onnx-model", str(output),
                "--output-file", str(tmp_path / "int8.json")]) == 0
    pytorch, int8_scores = (json.loads((tmp_path / name).read_text()) for name in ("pytorch.json", "int8.json"))
    assert int8_scores["accuracy"] == pytest.approx(pytorch["accuracy"], abs=0.1)
    assert int8_scores["loss"] == pytest.approx(pytorch["loss"], abs=0.05)


def test_an_int8_file_beyond_its_tolerance_is_refused_and_nothing_is_left(trained_run, tmp_path, capsys):
    output = tmp_path / "model.onnx"
    code = run(["export", str(trained_run), "-o", str(output), "--quantize", "int8", "--quantized-tolerance", "0"])
    error = " ".join(capsys.readouterr().err.split())
    assert code == 1
    assert "With int8 weights" in error and "--quantized-tolerance" in error and "Traceback" not in error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_graph_with_fused_transformer_operators_quantizes(tmp_path, exporter):
    # ONNX's shape inference types nothing that ONNX Runtime's fused operators output, which
    # quantization needs to know for the matrix products that follow them.
    from ipuflow.exporting.transformer_fusions import fuse_transformer_operators

    model, batch = TinyBert(), tiny_batch()
    plain, fused, quantized = tmp_path / "plain.onnx", tmp_path / "fused" / "m.onnx", tmp_path / "int8" / "m.onnx"
    record = export_model(model, batch, plain, exporter=exporter)
    assert fuse_transformer_operators(plain, fused, large=False)
    quantize_weights(fused, quantized, large=False)
    assert {"MatMulInteger", "SkipLayerNormalization"} <= operators(quantized)
    assert max(check_parity(model, quantized, [batch], record, tolerance=0.1).values()) <= 0.1
