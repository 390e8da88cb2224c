"""Seq2Vec encoders: masking, padding invariance, and the LSTM's equivalence to packed sequences."""

import pytest
import torch

from ipuflow.config import Params
from ipuflow.models import BagOfEmbeddingsEncoder, CnnEncoder, LstmEncoder, Seq2VecEncoder


def _inputs(lengths, max_length, dim=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(len(lengths), max_length, dim, generator=generator)
    mask = torch.arange(max_length).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return values * mask.unsqueeze(-1), mask


def test_bag_of_embeddings_is_the_masked_mean_or_sum():
    inputs, mask = _inputs([2, 3, 0], 4)
    inputs[0, 2:] = 100.0  # padding positions must not count, whatever they hold
    mean = BagOfEmbeddingsEncoder(4)(inputs, mask)
    torch.testing.assert_close(mean[0], inputs[0, :2].mean(dim=0))
    torch.testing.assert_close(mean[2], torch.zeros(4))
    summed = BagOfEmbeddingsEncoder(4, averaged=False)(inputs, mask)
    torch.testing.assert_close(summed[1], inputs[1, :3].sum(dim=0))


@pytest.mark.parametrize(
    "encoder",
    [
        CnnEncoder(4, num_filters=3, ngram_filter_sizes=(1, 2, 3)),
        LstmEncoder(4, hidden_size=5),
        LstmEncoder(4, hidden_size=5, num_layers=2, bidirectional=True),
    ],
    ids=["cnn", "lstm", "bilstm"],
)
def test_encoding_does_not_depend_on_padding_length(encoder):
    encoder.eval()
    inputs, mask = _inputs([3, 1, 2], 3)
    longer = torch.cat([inputs, torch.randn(3, 5, 4)], dim=1)  # padding holding garbage
    longer_mask = torch.cat([mask, torch.zeros(3, 5, dtype=torch.bool)], dim=1)
    torch.testing.assert_close(encoder(inputs, mask), encoder(longer, longer_mask))
    assert encoder(inputs, mask).shape == (3, encoder.get_output_dim())


def test_cnn_handles_texts_shorter_than_its_widest_filter_and_padding_rows():
    encoder = CnnEncoder(4, num_filters=2, ngram_filter_sizes=(2, 5), output_dim=6)
    inputs, mask = _inputs([1, 0], 2)
    output = encoder(inputs, mask)
    assert output.shape == (2, 6) and torch.isfinite(output).all()


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_equals_torch_lstm_on_packed_sequences(bidirectional):
    torch.manual_seed(0)
    encoder = LstmEncoder(4, hidden_size=3, num_layers=2, bidirectional=bidirectional)
    reference = torch.nn.LSTM(4, 3, num_layers=2, bidirectional=bidirectional, batch_first=True)
    with torch.no_grad():
        for layer in range(2):
            for direction, layers in (("", encoder.forward_layers), ("_reverse", encoder.backward_layers)):
                if direction and not bidirectional:
                    continue
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(reference, f"{name}_l{layer}{direction}").copy_(getattr(layers[layer], f"{name}_l0"))
    lengths = [5, 2, 3, 1]
    inputs, mask = _inputs(lengths, 5)
    packed = torch.nn.utils.rnn.pack_padded_sequence(inputs, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    _, (final, _) = reference(packed)
    expected = torch.cat([final[-2], final[-1]], dim=-1) if bidirectional else final[-1]
    torch.testing.assert_close(encoder(inputs, mask), expected)


def test_lstm_rows_of_padding_only_are_finite():
    encoder = LstmEncoder(4, hidden_size=3, bidirectional=True)
    inputs, mask = _inputs([0, 2], 3)
    assert torch.isfinite(encoder(inputs, mask)).all()


def test_encoders_from_config():
    encoder = Seq2VecEncoder.from_params(Params({"type": "lstm", "input_dim": 4, "hidden_size": 6, "bidirectional": True}))
    assert isinstance(encoder, LstmEncoder) and encoder.get_output_dim() == 12
    assert isinstance(Seq2VecEncoder.from_params(Params({"input_dim": 4})), BagOfEmbeddingsEncoder)
    cnn = Seq2VecEncoder.from_params(Params({"type": "cnn", "input_dim": 4, "num_filters": 2, "ngram_filter_sizes": [2, 3]}))
    assert cnn.get_output_dim() == 4
