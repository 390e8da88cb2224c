"""`ipuflow export --optimize`: ONNX Runtime's transformer fusions on the exported graph, parity kept."""

import onnx
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from ipuflow.commands.cli import run
from ipuflow.execution.onnx_metadata import read_record
from ipuflow.exporting.onnx_export import check_parity, export_model
from ipuflow.exporting.transformer_fusions import fuse_transformer_operators

pytestmark = pytest.mark.slow


class TinyBert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=16, num_labels=2)
        self.bert = BertForSequenceClassification(config).eval()

    def forward(self, tokens, tokens_mask):
        return {"logits": self.bert(input_ids=tokens, attention_mask=tokens_mask.long()).logits}


def tiny_batch():
    tokens = torch.randint(5, 100, (4, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(4, 16, dtype=torch.bool)
    mask[:, 10:] = False
    return {"tokens": tokens * mask, "tokens_mask": mask}


def operators(path):
    return {node.op_type for node in onnx.load(str(path)).graph.node}


def test_a_bert_graph_gets_fused_operators_with_the_same_outputs(tmp_path):
    model, batch = TinyBert(), tiny_batch()
    plain, fused = tmp_path / "plain.onnx", tmp_path / "fused" / "plain.onnx"
    record = export_model(model, batch, plain, exporter="dynamo")
    fusions = fuse_transformer_operators(plain, fused, large=False)
    assert fusions.get("SkipLayerNormalization", 0) >= 2 and fusions.get("BiasGelu", 0) >= 1
    assert {"SkipLayerNormalization", "BiasGelu"} <= operators(fused)
    assert "SkipLayerNormalization" not in operators(plain)
    assert max(check_parity(model, fused, [batch], record, tolerance=1e-5).values()) <= 1e-5
    assert read_record(str(fused)).weights_sha256 == record.weights_sha256  # the ipuflow record survives


def test_a_graph_without_transformer_subgraphs_is_left_as_exported(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, features):
            return {"logits": self.inner(features)}

    plain, fused = tmp_path / "plain.onnx", tmp_path / "fused" / "plain.onnx"
    export_model(Linear(), {"features": torch.randn(3, 4)}, plain, exporter="dynamo")
    assert fuse_transformer_operators(plain, fused, large=False) == {}
    assert not fused.exists()


def test_export_optimize_flag_records_the_fusions_and_parity(trained_run, tmp_path):
    # The tiny run is a bag-of-embeddings model: nothing to fuse, so --optimize keeps the plain graph.
    output = tmp_path / "model.onnx"
    assert run(["export", str(trained_run), "-o", str(output), "--optimize"]) == 0
    record = read_record(str(output))
    assert record.parity["transformer_fusions"] == {}
    assert max(record.parity["max_abs_diff"].values()) <= record.parity["tolerance"]
    assert not any(path.name.endswith(".fusing") for path in tmp_path.iterdir())


def test_an_unknown_optimize_value_is_a_usage_error(trained_run, tmp_path, capsys):
    assert run(["export", str(trained_run), "-o", str(tmp_path / "m.onnx"), "--optimize", "fast"]) == 2
    assert "fast" in capsys.readouterr().err
