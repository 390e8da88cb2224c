"""Fields and instances: vocabulary counting and indexing into the shared data contract."""

import numpy
import pytest

from ipuflow.config import ConfigurationError
from ipuflow.data import Instance, LabelField, MetadataField, TensorField, TextField, Vocabulary


def test_instance_counts_and_indexes_every_field_kind():
    instance = Instance(
        {
            "tokens": TextField(["a", "b", "a"]),
            "label": LabelField("pos"),
            "features": TensorField([1, 2.5]),
            "text": MetadataField("a b a"),
        }
    )
    counter = {}
    instance.count_vocab_items(counter)
    assert counter == {"tokens": {"a": 2, "b": 1}, "labels": {"pos": 1}}

    vocab = Vocabulary(counter=counter)
    indexed = instance.index(vocab)
    assert indexed["tokens"] == [2, 3, 2]
    assert indexed["label"] == 0
    assert indexed["features"].dtype == numpy.float32
    assert indexed["features"].tolist() == [1.0, 2.5]
    assert indexed["text"] == "a b a"
    assert set(instance) == {"tokens", "label", "features", "text"}


def test_unknown_token_maps_to_oov_but_unknown_label_is_an_error():
    vocab = Vocabulary(counter={"tokens": {"a": 1}, "labels": {"pos": 1}})
    assert TextField(["a", "zzz"]).index(vocab) == [2, 1]
    with pytest.raises(ConfigurationError, match="'neg' is not in the vocabulary's 'labels' namespace"):
        LabelField("neg").index(vocab)


def test_pre_indexed_text_field_needs_no_vocabulary():
    field = TextField(["[CLS]", "hi", "[SEP]"], token_ids=[101, 7592, 102])
    counter = {}
    field.count_vocab_items(counter)
    assert counter == {}
    assert field.index(Vocabulary.empty()) == [101, 7592, 102]
    with pytest.raises(ValueError, match="3 tokens but 2 token ids"):
        TextField(["a", "b", "c"], token_ids=[1, 2])


def test_int_labels_are_indexed_as_strings_unless_skip_indexing():
    counter = {}
    LabelField(3).count_vocab_items(counter)
    assert counter == {"labels": {"3": 1}}
    vocab = Vocabulary(counter=counter)
    assert LabelField(3).index(vocab) == LabelField("3").index(vocab) == 0
    assert LabelField(7, skip_indexing=True).index(vocab) == 7
    with pytest.raises(ValueError):
        LabelField(True)


def test_tensor_field_rejects_a_matrix():
    with pytest.raises(ValueError, match="vector"):
        TensorField([[1.0, 2.0]])
