"""Metrics against hand computation and scikit-learn, with padding rows and masks."""

import pytest
import torch
from sklearn.metrics import f1_score

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary
from ipuflow.metrics import CategoricalAccuracy, F1Measure, MeanAbsoluteError, Metric

IGNORE = -100

# Predicted classes: 0, 1, 1, 2, 2, 0; the last row is padding.
SCORES = torch.tensor(
    [[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.3, 0.6, 0.1], [0.2, 0.2, 0.6], [0.1, 0.4, 0.5], [0.7, 0.2, 0.1]]
)
GOLD = torch.tensor([0, 1, 0, 2, 1, IGNORE])
PREDICTED = [0, 1, 1, 2, 2]
REAL_GOLD = [0, 1, 0, 2, 1]


def test_accuracy_skips_padding_rows_and_accumulates():
    accuracy = CategoricalAccuracy()
    accuracy(SCORES, GOLD)
    assert accuracy.get_metric() == {"": pytest.approx(3 / 5)}
    accuracy(SCORES[:2], GOLD[:2])
    assert accuracy.get_metric(reset=True) == {"": pytest.approx(5 / 7)}
    assert accuracy.get_metric() == {"": 0.0}


def test_accuracy_with_mask_top_k_and_class_ids():
    accuracy = CategoricalAccuracy()
    accuracy(SCORES, GOLD, mask=torch.tensor([True, True, False, True, True, True]))
    assert accuracy.get_metric()[""] == pytest.approx(3 / 4)

    top2 = CategoricalAccuracy(top_k=2)
    top2(SCORES, GOLD)
    # Row 2 (gold 0, top-2 = {1, 0}) and row 4 (gold 1, top-2 = {2, 1}) now count.
    assert top2.get_metric()[""] == pytest.approx(5 / 5)

    ids = CategoricalAccuracy(num_classes=3)
    ids(torch.tensor(PREDICTED), torch.tensor(REAL_GOLD))
    assert ids.get_metric()[""] == pytest.approx(3 / 5)


def test_accuracy_over_sequences_with_classes_last():
    accuracy = CategoricalAccuracy()
    accuracy(SCORES[:4].reshape(2, 2, 3), GOLD[:4].reshape(2, 2))
    assert accuracy.get_metric()[""] == pytest.approx(3 / 4)


@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
def test_f1_matches_scikit_learn(average):
    f1 = F1Measure(average=average)
    f1(SCORES, GOLD)
    assert f1.get_metric()[""] == pytest.approx(f1_score(REAL_GOLD, PREDICTED, average=average))


def test_f1_per_class_keys_come_from_the_vocabulary():
    vocab = Vocabulary(tokens_to_add={"labels": ["neg", "neu", "pos"]})
    f1 = F1Measure(average="none", vocab=vocab)
    assert f1.get_metric() == {"neg": 0.0, "neu": 0.0, "pos": 0.0}
    f1(SCORES, GOLD)
    expected = f1_score(REAL_GOLD, PREDICTED, average=None)
    values = f1.get_metric()
    assert list(values) == ["neg", "neu", "pos"]
    assert list(values.values()) == pytest.approx(list(expected))

    by_id = F1Measure(average="none")
    by_id(SCORES, GOLD)
    assert list(by_id.get_metric()) == ["0", "1", "2"]


def test_mean_absolute_error_with_mask():
    mae = MeanAbsoluteError()
    mae(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 2.0, 0.0]), mask=torch.tensor([True, True, False]))
    assert mae.get_metric()[""] == pytest.approx(0.25)
    mae(torch.tensor([[4.0]]), torch.tensor([2.0]))
    assert mae.get_metric(reset=True)[""] == pytest.approx((0.5 + 0 + 2) / 3)
    assert mae.get_metric()[""] == 0.0


def test_metrics_from_config_get_the_vocabulary_injected():
    vocab = Vocabulary(tokens_to_add={"labels": ["neg", "pos"]})
    f1 = Metric.from_params(Params({"type": "f1", "average": "none"}), vocab=vocab)
    assert f1.get_metric() == {"neg": 0.0, "pos": 0.0}
    assert isinstance(Metric.from_params("categorical_accuracy"), CategoricalAccuracy)
    assert isinstance(Metric.from_params("mean_absolute_error"), MeanAbsoluteError)
    with pytest.raises(ConfigurationError, match="^average: expected one of 'macro', 'micro', 'weighted', 'none', found"):
        Metric.from_params(Params({"type": "f1", "average": "binary"}))


def test_bad_shapes_are_reported():
    with pytest.raises(ValueError, match="expects scores"):
        CategoricalAccuracy()(torch.zeros(4, 3), torch.zeros(4, 2, dtype=torch.long))


def test_class_ids_outside_the_classes():
    # A predicted id outside [0, num_classes) is a wrong prediction of no class.
    f1 = F1Measure(average="none", num_classes=2)
    f1(torch.tensor([0, 5, -7, 1]), torch.tensor([0, 1, 1, 1]))
    assert f1.get_metric() == {"0": pytest.approx(1.0), "1": pytest.approx(2 * 1 / (1 + 3))}
    # A kept gold label outside them means num_classes is wrong: said when the metric is read.
    f1(torch.tensor([0]), torch.tensor([2]))
    with pytest.raises(ValueError, match=r"1 gold labels were not below num_classes \(2\)"):
        f1.get_metric()
    with pytest.raises(ValueError, match="top_k 2 needs scores"):
        CategoricalAccuracy(top_k=2, num_classes=3)(torch.tensor([0, 1]), torch.tensor([0, 1]))
