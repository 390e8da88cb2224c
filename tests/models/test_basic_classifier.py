"""basic_classifier: forward, loss with padding rows, backward, metrics, readable outputs, config."""

import copy
from pathlib import Path

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import FixedShapeDataLoader, RegexTokenizer, TextClassificationJsonReader, Vocabulary
from ipuflow.metrics import CategoricalAccuracy, F1Measure
from ipuflow.models import BagOfEmbeddingsEncoder, BasicClassifier, CnnEncoder, Model

ENCODERS = {
    "bag_of_embeddings": {"type": "bag_of_embeddings"},
    "cnn": {"type": "cnn", "num_filters": 4, "ngram_filter_sizes": [1, 2]},
    "lstm": {"type": "lstm", "hidden_size": 6, "bidirectional": True},
}


@pytest.mark.parametrize("encoder", ENCODERS.values(), ids=ENCODERS.keys())
def test_forward_loss_and_backward(vocab, text_batch, encoder):
    torch.manual_seed(0)
    model = Model.from_params(Params({"type": "basic_classifier", "embedding_dim": 8, "encoder": encoder, "dropout": 0.1}), vocab=vocab)
    assert isinstance(model, BasicClassifier) and model.default_predictor == "text_classifier"
    outputs = model(**text_batch)
    assert outputs["logits"].shape == (4, 2) and outputs["probs"].shape == (4, 2)
    torch.testing.assert_close(outputs["probs"].sum(-1), torch.ones(4))
    # The loss is the mean over the three labelled rows; the padding row does not count.
    model.eval()
    outputs = model(**text_batch)
    expected = torch.nn.functional.cross_entropy(outputs["logits"][:3], text_batch["label"][:3])
    torch.testing.assert_close(outputs["loss"], expected)
    outputs["loss"].backward()
    assert model.embedding.weight.grad is not None
    assert torch.all(model.embedding.weight.grad[0] == 0)  # padding embedding never learns


def test_padding_rows_change_neither_loss_nor_gradients(vocab, text_batch):
    torch.manual_seed(0)
    model = BasicClassifier(vocab, 8, BagOfEmbeddingsEncoder(8))
    other = copy.deepcopy(model)
    model(**text_batch)["loss"].backward()
    real_rows = {key: value[:3] for key, value in text_batch.items()}
    other(**real_rows)["loss"].backward()
    for (name, param), (_, other_param) in zip(model.named_parameters(), other.named_parameters()):
        torch.testing.assert_close(param.grad, other_param.grad, msg=name)


def test_all_padding_batch_has_zero_loss_not_nan(vocab, text_batch):
    model = BasicClassifier(vocab, 8, BagOfEmbeddingsEncoder(8))
    padding_only = {key: value[3:] for key, value in text_batch.items()}
    assert model(**padding_only)["loss"].item() == 0.0


def test_no_labels_no_loss(vocab, text_batch):
    model = BasicClassifier(vocab, 8, CnnEncoder(8, num_filters=2, ngram_filter_sizes=(2,)))
    outputs = model(tokens=text_batch["tokens"], tokens_mask=text_batch["tokens_mask"])
    assert "loss" not in outputs


def test_metrics_skip_padding_rows_and_reset(vocab, text_batch):
    model = BasicClassifier(
        vocab, 8, BagOfEmbeddingsEncoder(8), metrics={"accuracy": CategoricalAccuracy(), "f1": F1Measure(average="none", vocab=vocab)}
    )
    outputs = {"logits": torch.tensor([[2.0, 0.0], [2.0, 0.0], [2.0, 0.0], [0.0, 2.0]])}
    model.update_metrics(outputs, text_batch)  # predicts fresh ×3 (+ the padding row): 2 of 3 right
    metrics = model.get_metrics(reset=True)
    assert metrics == pytest.approx({"accuracy": 2 / 3, "f1_fresh": 0.8, "f1_rotten": 0.0})
    assert all(isinstance(value, float) for value in metrics.values())
    assert model.get_metrics()["accuracy"] == 0.0


def test_human_readable_outputs(vocab, text_batch):
    model = BasicClassifier(vocab, 8, BagOfEmbeddingsEncoder(8))
    readable = model.make_output_human_readable({"probs": torch.tensor([[0.9, 0.1], [0.3, 0.7]]), "loss": torch.tensor(1.0)})
    assert readable["label"] == ["fresh", "rotten"]
    assert [row == pytest.approx(expected) for row, expected in zip(readable["probs"], [[0.9, 0.1], [0.3, 0.7]])] == [True, True]
    assert set(readable) == {"label", "probs"}


def test_config_errors(vocab):
    with pytest.raises(ConfigurationError, match="^encoder.input_dim: "):
        Model.from_params(Params({"type": "basic_classifier", "embedding_dim": 8, "encoder": {"type": "lstm", "input_dim": 3, "hidden_size": 2}}), vocab=vocab)
    with pytest.raises(ConfigurationError, match="'labels' namespace is empty"):
        Model.from_params(Params({"type": "basic_classifier", "embedding_dim": 8}), vocab=Vocabulary.empty())
    with pytest.raises(ConfigurationError, match="conv_layer_activation: unknown activation 'relux'"):
        Model.from_params(Params({"type": "basic_classifier", "embedding_dim": 8, "encoder": {"type": "cnn", "conv_layer_activation": "relux"}}), vocab=vocab)


def test_learns_the_fixture_data_through_reader_vocabulary_and_loader():
    # The whole data path: reader → vocabulary → indexed instances → fixed-shape loader → model.
    path = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "text_classification.jsonl"
    instances = TextClassificationJsonReader(tokenizer=RegexTokenizer()).read(path)
    vocab = Vocabulary.from_params(Params({}), instances=instances)
    loader = FixedShapeDataLoader([instance.index(vocab) for instance in instances], batch_size=4, shuffle=True, drop_last=False, pad_on_batch_axis=True, max_length=8)
    torch.manual_seed(0)
    model = Model.from_params(Params({"type": "basic_classifier", "embedding_dim": 16, "encoder": "bag_of_embeddings"}), vocab=vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for epoch in range(30):
        loader.set_epoch(epoch)
        for batch in loader:
            optimizer.zero_grad()
            model(**batch)["loss"].backward()
            optimizer.step()
    model.eval()
    loader.set_epoch(0)
    for batch in loader:
        model.update_metrics(model(**batch), batch)
    assert model.get_metrics(reset=True)["accuracy"] == 1.0
