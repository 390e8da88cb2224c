"""The grouped_vote postprocessor: one prediction per group of windows, scored against the gold label."""

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.fields import LabelField, MetadataField
from ipuflow.data.instance import Instance
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.evaluation.postprocessor import Postprocessor


def window(doc_id, label):
    return Instance({"id": MetadataField(doc_id), "label": LabelField(label)})


def test_windows_vote_by_mean_probability_and_are_scored_per_group():
    instances = [window("a", "pos"), window("a", "pos"), window("b", "neg"), window("b", "neg"), window("c", "pos")]
    vocab = Vocabulary.from_instances(instances)
    pos = vocab.get_token_index("pos", "labels")
    def probs(p_pos):
        values = [0.0, 0.0]
        values[pos], values[1 - pos] = p_pos, 1 - p_pos
        return values
    outputs = [{"probs": probs(0.9)}, {"probs": probs(0.3)},   # a: mean 0.6 → pos (right)
               {"probs": probs(0.2)}, {"probs": probs(0.6)},   # b: mean 0.4 → neg (right)
               {"probs": probs(0.1)}]                          # c: neg (wrong)
    postprocessor = Postprocessor.from_params(Params({"type": "grouped_vote"}), vocab=vocab)
    predictions = postprocessor(outputs, instances)
    assert [p["id"] for p in predictions] == ["a", "b", "c"]
    assert [p["label"] for p in predictions] == ["pos", "neg", "neg"]
    assert predictions[0]["probs"][pos] == pytest.approx(0.6)
    assert postprocessor.metrics(predictions, instances) == {"grouped_accuracy": pytest.approx(2 / 3)}


def test_a_missing_group_field_is_a_clear_error():
    instances = [Instance({"label": LabelField("pos")})]
    postprocessor = Postprocessor.from_params(Params({"type": "grouped_vote", "group_field": "doc"}))
    with pytest.raises(ConfigurationError, match="no 'doc' field"):
        postprocessor([{"probs": [1.0]}], instances)
