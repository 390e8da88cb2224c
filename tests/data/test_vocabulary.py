"""Vocabulary: building from instances, limits, padding, files, config construction."""

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Instance, LabelField, TextField, Vocabulary
from ipuflow.data.vocabulary import DEFAULT_OOV_TOKEN, DEFAULT_PADDING_TOKEN


def _instances():
    texts = [("the cat sat", "pos"), ("the dog sat", "neg"), ("the cat ran", "pos"), ("a bird", "neg")]
    return [Instance({"tokens": TextField(text.split()), "label": LabelField(label)}) for text, label in texts]


def test_padded_and_non_padded_namespaces():
    vocab = Vocabulary.from_instances(_instances())
    tokens = vocab.get_index_to_token_vocabulary("tokens")
    assert tokens[0] == DEFAULT_PADDING_TOKEN and tokens[1] == DEFAULT_OOV_TOKEN
    # Most frequent first, ties alphabetically: the(3); cat, sat(2); a, bird, dog, ran(1).
    assert [tokens[i] for i in range(2, 9)] == ["the", "cat", "sat", "a", "bird", "dog", "ran"]
    assert vocab.get_index_to_token_vocabulary("labels") == {0: "neg", 1: "pos"}
    assert vocab.get_vocab_size("tokens") == 9 and vocab.get_vocab_size("labels") == 2
    assert vocab.get_token_index("unseen") == 1
    assert vocab.get_token_from_index(2) == "the"
    # Namespaces ending in "tags" are non-padded too; others are padded.
    assert vocab.get_vocab_size("pos_tags") == 0 and vocab.get_vocab_size("characters") == 2


def test_ids_do_not_depend_on_the_order_of_the_data():
    assert Vocabulary.from_instances(_instances()) == Vocabulary.from_instances(list(reversed(_instances())))


def test_min_count_and_max_vocab_size():
    vocab = Vocabulary.from_instances(_instances(), min_count={"tokens": 2})
    assert list(vocab.get_token_to_index_vocabulary("tokens")) == [DEFAULT_PADDING_TOKEN, DEFAULT_OOV_TOKEN, "the", "cat", "sat"]
    assert vocab.get_vocab_size("labels") == 2  # min_count applies per namespace

    vocab = Vocabulary.from_instances(_instances(), max_vocab_size=2)
    assert vocab.get_vocab_size("tokens") == 4  # padding + OOV + the 2 most frequent
    assert vocab.get_vocab_size("labels") == 2

    vocab = Vocabulary.from_instances(_instances(), max_vocab_size={"tokens": 1})
    assert vocab.get_vocab_size("tokens") == 3 and vocab.get_vocab_size("labels") == 2


def test_limits_naming_an_unknown_namespace_are_errors():
    with pytest.raises(ConfigurationError, match=r"^min_count\.token: no instance has items in namespace 'token'"):
        Vocabulary.from_instances(_instances(), min_count={"token": 2})


def test_save_and_load_round_trip(tmp_path):
    vocab = Vocabulary.from_instances(_instances(), tokens_to_add={"tokens": ["line\nbreak", "tab\there"]})
    vocab.save_to_files(tmp_path / "vocabulary")
    files = sorted(path.name for path in (tmp_path / "vocabulary").iterdir())
    assert files == ["labels.txt", "non_padded_namespaces.txt", "tokens.txt"]
    lines = (tmp_path / "vocabulary" / "tokens.txt").read_text().split("\n")
    assert lines[0] == DEFAULT_OOV_TOKEN and "line@@NEWLINE@@break" in lines
    assert (tmp_path / "vocabulary" / "labels.txt").read_text() == "neg\npos\n"

    loaded = Vocabulary.from_files(tmp_path / "vocabulary")
    assert loaded == vocab
    assert loaded.get_token_index("line\nbreak") == vocab.get_token_index("line\nbreak")


def test_from_files_of_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigurationError, match="is not a saved vocabulary"):
        Vocabulary.from_files(tmp_path / "nowhere")


def test_built_from_config_with_instances_injected(tmp_path):
    vocab = Vocabulary.from_params(Params({"min_count": {"tokens": 2}}), instances=_instances())
    assert vocab.get_vocab_size("tokens") == 5

    vocab.save_to_files(tmp_path)
    loaded = Vocabulary.from_params(Params({"type": "from_files", "directory": str(tmp_path)}), instances=_instances())
    assert loaded == vocab

    empty = Vocabulary.from_params(Params({"type": "empty"}), instances=_instances())
    assert empty.get_vocab_size("tokens") == 2 and empty.get_vocab_size("labels") == 0

    with pytest.raises(ConfigurationError, match="min_cont"):
        Vocabulary.from_params(Params({"min_cont": {"tokens": 2}}), instances=_instances())


def test_the_build_log_gives_the_sizes_after_min_count(caplog):
    import logging

    instances = [Instance({"tokens": TextField(text.split()), "label": LabelField("x")})
                 for text in ("a a b", "a c d", "e a b")]
    caplog.set_level(logging.INFO, logger="ipuflow.data.vocabulary")
    vocab = Vocabulary.from_instances(instances, min_count={"tokens": 2})
    assert vocab.get_vocab_size("tokens") == 4  # padding, OOV, a, b
    message = " ".join(record.getMessage() for record in caplog.records)
    assert "from 3 instances" in message
    assert "tokens: 4 (5 distinct, 3 below min_count 2)" in message, message
