"""feedforward_classifier: shapes, loss, config, and learning the shipped digits."""

from pathlib import Path

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import FixedShapeDataLoader, TensorClassificationReader, Vocabulary
from ipuflow.models import IGNORE_LABEL, FeedforwardClassifier, Model

DIGITS = Path(__file__).resolve().parents[2] / "data" / "digits"


def test_forward_loss_backward_from_config():
    vocab = Vocabulary(tokens_to_add={"labels": ["3", "7", "1"]})
    model = Model.from_params(
        Params({"type": "feedforward_classifier", "input_dim": 4, "hidden_dims": [8, 6], "activation": "tanh", "dropout": 0.2}),
        vocab=vocab,
    )
    assert isinstance(model, FeedforwardClassifier) and model.default_predictor == "tensor_classifier"
    assert [layer.out_features for layer in model.layers if isinstance(layer, torch.nn.Linear)] == [8, 6, 3]
    batch = {"features": torch.randn(3, 4), "label": torch.tensor([2, 0, IGNORE_LABEL])}
    outputs = model(**batch)
    assert outputs["logits"].shape == (3, 3)
    outputs["loss"].backward()
    assert all(param.grad is not None for param in model.parameters())
    assert model.make_output_human_readable(outputs)["label"][0] in {"3", "7", "1"}


def test_bad_activation_is_a_config_error():
    vocab = Vocabulary(tokens_to_add={"labels": ["a", "b"]})
    with pytest.raises(ConfigurationError, match="^activation: unknown activation 'rleu'; expected one of relu"):
        FeedforwardClassifier(vocab, input_dim=4, activation="rleu")


def test_learns_digits():
    reader = TensorClassificationReader(feature_dim=64)
    train = reader.read(DIGITS / "train.jsonl")
    validation = reader.read(DIGITS / "validation.jsonl")
    vocab = Vocabulary.from_instances(train)
    loader = FixedShapeDataLoader([instance.index(vocab) for instance in train], batch_size=64, shuffle=True, seed=1)
    torch.manual_seed(0)
    model = FeedforwardClassifier(vocab, input_dim=64, hidden_dims=(64,))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(8):
        loader.set_epoch(epoch)
        for batch in loader:
            optimizer.zero_grad()
            model(**batch)["loss"].backward()
            optimizer.step()
    model.eval()
    validation_loader = FixedShapeDataLoader([instance.index(vocab) for instance in validation], batch_size=64, drop_last=False, pad_on_batch_axis=True)
    with torch.no_grad():
        for batch in validation_loader:
            model.update_metrics(model(**batch), batch)
    assert model.get_metrics(reset=True)["accuracy"] > 0.9
