"""The built-in metrics give torchmetrics' values (the oracle: torchmetrics fed only the rows the
metric keeps), batch after batch, over random scores with ignored and masked rows, every top-k and
averaging mode, scores and class ids, flat and sequence shapes, and through a checkpoint."""

import io

import pytest
import torch

from ipuflow.config import Params
from ipuflow.metrics import CategoricalAccuracy, F1Measure, MeanAbsoluteError, Metric

torchmetrics = pytest.importorskip("torchmetrics")  # the dev extra installs it; ipuflow itself does not need it

from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score  # noqa: E402
from torchmetrics.regression import MeanAbsoluteError as OracleMeanAbsoluteError  # noqa: E402

CLASSES = 7
SHAPES = [(13,), (3, 5)]  # rows, and sentences × words (classes last)


def batches(seed, shape, count=4, ids=False, dtype=torch.float32):
    """Random (predictions, gold, mask) batches: gold has -100 padding and other negative labels,
    the mask drops about a fifth of the rows, and small batches leave classes out."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(count):
        scores = torch.randn(*shape, CLASSES, generator=generator).to(dtype)
        gold = torch.randint(0, CLASSES, shape, generator=generator)
        gold[torch.rand(shape, generator=generator) < 0.15] = -100
        gold[torch.rand(shape, generator=generator) < 0.05] = -3
        mask = torch.rand(shape, generator=generator) > 0.2
        yield (scores.argmax(-1) if ids else scores), gold, mask


def kept(predictions, gold, mask):
    """The rows the metric keeps (non-negative gold, mask true), flat, as the oracle sees them."""
    keep = (gold >= 0) & mask
    return predictions[keep], gold[keep]


def compare(metric, oracle, seed, shape, ids=False, dtype=torch.float32):
    for number, (predictions, gold, mask) in enumerate(batches(seed, shape, ids=ids, dtype=dtype)):
        metric(predictions, gold, mask=mask)
        oracle.update(*kept(predictions, gold, mask))
        expected = oracle.compute()
        values = metric.get_metric(reset=number == 1)
        if expected.dim() == 0:
            assert values == {"": pytest.approx(float(expected), abs=1e-6)}
        else:
            assert list(values.values()) == pytest.approx(expected.tolist(), abs=1e-6)
        if number == 1:
            oracle.reset()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_accuracy_matches_torchmetrics(shape, top_k):
    compare(CategoricalAccuracy(top_k=top_k), MulticlassAccuracy(CLASSES, top_k=top_k, average="micro"), seed=top_k,
            shape=shape)


def test_accuracy_from_class_ids_and_low_precision_scores_matches_torchmetrics():
    compare(CategoricalAccuracy(num_classes=CLASSES), MulticlassAccuracy(CLASSES, average="micro"), seed=5,
            shape=(11,), ids=True)
    compare(CategoricalAccuracy(top_k=2), MulticlassAccuracy(CLASSES, top_k=2, average="micro"), seed=6,
            shape=(2, 9), dtype=torch.bfloat16)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("average", ["macro", "micro", "weighted", "none"])
def test_f1_matches_torchmetrics(shape, average):
    oracle = MulticlassF1Score(CLASSES, average=None if average == "none" else average)
    compare(F1Measure(average=average), oracle, seed=len(average), shape=shape)


@pytest.mark.parametrize("average", ["macro", "weighted", "none"])
def test_f1_from_class_ids_matches_torchmetrics(average):
    oracle = MulticlassF1Score(CLASSES, average=None if average == "none" else average)
    compare(F1Measure(average=average, num_classes=CLASSES), oracle, seed=9, shape=(3, 4), ids=True)


def test_nothing_kept_gives_zeros():
    for metric in (CategoricalAccuracy(), F1Measure(), F1Measure(average="weighted")):
        metric(torch.randn(4, 3), torch.tensor([0, 1, -100, 2]), mask=torch.tensor([False, False, True, False]))
        assert metric.get_metric() == {"": 0.0}
    per_class = F1Measure(average="none")
    per_class(torch.randn(2, 3), torch.full((2,), -100))
    assert per_class.get_metric() == {"0": 0.0, "1": 0.0, "2": 0.0}


@pytest.mark.parametrize("shape", [(9,), (9, 1)])
def test_mean_absolute_error_matches_torchmetrics(shape):
    metric, oracle = MeanAbsoluteError(), OracleMeanAbsoluteError()
    generator = torch.Generator().manual_seed(3)
    for number in range(4):
        predictions = torch.randn(shape, generator=generator)
        gold = torch.randn(9, generator=generator)
        mask = torch.rand(9, generator=generator) > 0.3
        metric(predictions, gold, mask=mask)
        oracle.update(predictions.reshape(9)[mask], gold[mask])
        assert metric.get_metric(reset=number == 1) == {"": pytest.approx(float(oracle.compute()), abs=1e-6)}
        if number == 1:
            oracle.reset()


def through_a_checkpoint(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("config", [{"type": "categorical_accuracy", "top_k": 2}, {"type": "f1", "average": "macro"},
                                    {"type": "f1", "average": "none"}])
def test_a_checkpoint_taken_mid_way_resumes_to_torchmetrics_value(config):
    oracle = (MulticlassAccuracy(CLASSES, top_k=2, average="micro") if config["type"] == "categorical_accuracy"
              else MulticlassF1Score(CLASSES, average=None if config["average"] == "none" else config["average"]))
    first = Metric.from_params(Params(dict(config)))
    resumed = Metric.from_params(Params(dict(config)))
    for number, (scores, gold, mask) in enumerate(batches(11, (3, 5))):
        if number == 2:
            resumed.load_state_dict(through_a_checkpoint(first.state_dict()))
        (resumed if number >= 2 else first)(scores, gold, mask=mask)
        oracle.update(*kept(scores, gold, mask))
    values = resumed.get_metric()
    assert list(values.values()) == pytest.approx(torch.atleast_1d(oracle.compute()).tolist(), abs=1e-6)


@pytest.mark.parametrize("config", [{"type": "categorical_accuracy", "top_k": 2}, {"type": "f1", "average": "weighted"},
                                    {"type": "f1", "average": "none"}])
def test_a_checkpoint_written_while_the_metrics_wrapped_torchmetrics_still_resumes(config):
    """The classification metrics used to checkpoint their torchmetrics object's state_dict (`tp`,
    `fp`, `tn`, `fn`, ignoring gold label -1): a run checkpointed then resumes to the same value."""
    accuracy = config["type"] == "categorical_accuracy"
    average = "micro" if accuracy else config["average"]
    wrapped = (MulticlassAccuracy if accuracy else MulticlassF1Score)(
        CLASSES, average=average, ignore_index=-1, validate_args=False, **({"top_k": 2} if accuracy else {}))
    wrapped.persistent(True)
    oracle = (MulticlassAccuracy(CLASSES, top_k=2, average="micro") if accuracy
              else MulticlassF1Score(CLASSES, average=None if average == "none" else average))
    resumed = Metric.from_params(Params(dict(config)))
    for number, (scores, gold, mask) in enumerate(batches(12, (13,))):
        if number < 2:
            wrapped.update(scores, torch.where((gold >= 0) & mask, gold, -1))
        else:
            if number == 2:
                old_state = {"num_classes": CLASSES, "updates": 2,
                             "state": {key: value.cpu() for key, value in wrapped.state_dict().items()}}
                resumed.load_state_dict(through_a_checkpoint(old_state))
            resumed(scores, gold, mask=mask)
        oracle.update(*kept(scores, gold, mask))
    values = resumed.get_metric()
    assert list(values.values()) == pytest.approx(torch.atleast_1d(oracle.compute()).tolist(), abs=1e-6)
