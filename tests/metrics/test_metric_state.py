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


class CountingAccuracy(Metric):
    """A user's metric that writes no state_dict: plain counters and a tensor of per-class hits."""

    def __init__(self) -> None:
        self.correct = 0
        self.total = 0.0
        self.per_class = torch.zeros(3)
        self.name = "counting"

    def __call__(self, predictions, gold, mask=None):
        hits = predictions.argmax(-1) == gold
        self.correct += int(hits.sum())
        self.total += float(gold.numel())
        self.per_class += torch.bincount(gold.clamp(min=0)[hits], minlength=3).float()

    def get_metric(self, reset=False):
        value = {"": self.correct / self.total if self.total else 0.0, "class_2": float(self.per_class[2])}
        if reset:
            self.reset()
        return value

    def reset(self):
        self.correct, self.total, self.per_class = 0, 0.0, torch.zeros(3)


def test_a_metric_without_state_dict_checkpoints_its_plain_attributes():
    whole = CountingAccuracy()
    for batch in BATCHES:
        whole(*batch)
    first_half = CountingAccuracy()
    first_half(*BATCHES[0])
    resumed = CountingAccuracy()
    resumed.load_state_dict(through_a_checkpoint(first_half.state_dict()))
    resumed(*BATCHES[1])
    assert resumed.get_metric() == pytest.approx(whole.get_metric())
    assert isinstance(resumed.correct, int) and resumed.name == "counting"


def test_a_metric_with_state_the_default_cannot_save_names_the_methods_to_write():
    class Opaque(CountingAccuracy):
        def __init__(self) -> None:
            super().__init__()
            self.buffer = io.BytesIO()

    with pytest.raises(NotImplementedError, match=r"Opaque.*buffer.*state_dict.*load_state_dict"):
        Opaque().state_dict()
