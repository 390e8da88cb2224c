"""Metric state survives a checkpoint: save mid-way, load into a fresh metric, finish, same value."""

import io

import pytest
import torch

from ipuflow.config import Params
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric

BATCHES = [
    (torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.1, 0.2, 0.9]]), torch.tensor([0, 2, 2])),
    (torch.tensor([[0.0, 1.0, 0.0], [5.0, 1.0, 1.0], [0.1, 0.2, 0.9]]), torch.tensor([1, 0, -100])),
]


def through_a_checkpoint(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("config", [{"type": "categorical_accuracy"}, {"type": "f1", "average": "macro"},
                                    {"type": "f1", "average": "none"}, {"type": "mean_absolute_error"}])
def test_state_dict_round_trip_continues_the_same_accumulation(config):
    vocab = Vocabulary.empty()
    for label in ("a", "b", "c"):
        vocab.add_token_to_namespace(label, "labels")

    def batches():
        if config["type"] == "mean_absolute_error":
            return [(scores.argmax(-1).float(), gold.clamp(min=0).float()) for scores, gold in BATCHES]
        return BATCHES

    whole = Metric.from_params(Params(dict(config)), vocab=vocab)
    for predictions, gold in batches():
        whole(predictions, gold)
    first_half = Metric.from_params(Params(dict(config)), vocab=vocab)
    first_half(*batches()[0])
    resumed = Metric.from_params(Params(dict(config)), vocab=vocab)
    resumed.load_state_dict(through_a_checkpoint(first_half.state_dict()))
    resumed(*batches()[1])
    assert resumed.get_metric() == pytest.approx(whole.get_metric())
    fresh = Metric.from_params(Params(dict(config)), vocab=vocab)
    fresh.load_state_dict(through_a_checkpoint(fresh.state_dict()))
    assert fresh.get_metric() == Metric.from_params(Params(dict(config)), vocab=vocab).get_metric()
