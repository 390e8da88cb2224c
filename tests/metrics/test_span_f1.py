"""span_f1: seqeval's strict entity-level scores, accumulated over batches."""

import pytest
import torch
from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

from ipuflow.data import Vocabulary
from ipuflow.metrics import Metric, SpanF1

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def ids(rows):
    width = max(len(row) for row in rows)
    values = torch.tensor([[TAGS.index(tag) for tag in row] + [0] * (width - len(row)) for row in rows])
    mask = torch.tensor([[True] * len(row) + [False] * (width - len(row)) for row in rows])
    return values, mask


def test_matches_seqeval_strict_on_its_documented_example():
    # seqeval's README example (strict mode, IOB2): the I-MISC that follows O is no entity.
    gold = [["B-PER", "I-PER", "O"], ["B-MISC", "I-MISC", "O"]]
    predicted = [["B-PER", "I-PER", "O"], ["I-MISC", "I-MISC", "O"]]
    metric = SpanF1(labels=TAGS)
    predicted_ids, mask = ids(predicted)
    gold_ids, _ = ids(gold)
    metric(predicted_ids, gold_ids, mask)
    values = metric.get_metric()
    assert values["f1"] == pytest.approx(f1_score(gold, predicted, mode="strict", scheme=IOB2))
    assert values["precision"] == pytest.approx(precision_score(gold, predicted, mode="strict", scheme=IOB2)) == 1.0
    assert values["recall"] == pytest.approx(recall_score(gold, predicted, mode="strict", scheme=IOB2)) == 0.5
    assert values["f1_PER"] == 1.0 and values["f1_MISC"] == 0.0


def test_batches_accumulate_to_the_whole_corpus_score_and_padding_is_ignored():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "I-LOC"], ["O", "B-MISC", "I-MISC", "O", "B-PER"], ["B-PER"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-LOC", "I-LOC"], ["O", "B-MISC", "I-MISC", "B-LOC", "B-PER"], ["I-PER"]]
    metric = SpanF1(vocab=Vocabulary(tokens_to_add={"labels": TAGS}))
    for start in (0, 2):
        predicted_ids, mask = ids(predicted[start:start + 2])
        gold_ids, _ = ids(gold[start:start + 2])
        predicted_ids[~mask] = 3  # B-LOC under the padding: must not count
        metric(predicted_ids, gold_ids, mask)
    expected = f1_score(gold, predicted, mode="strict", scheme=IOB2)
    assert metric.get_metric(reset=True)["f1"] == pytest.approx(expected)
    assert metric.get_metric()["f1"] == 0.0  # reset


def test_state_round_trip_and_registered_name():

    metric = SpanF1(labels=TAGS)
    predicted_ids, mask = ids([["B-PER", "I-PER"]])
    metric(predicted_ids, predicted_ids, mask)
    other = SpanF1(labels=TAGS)
    other.load_state_dict(metric.state_dict())
    assert other.get_metric()["f1"] == 1.0
    assert Metric.by_name("span_f1") is SpanF1
