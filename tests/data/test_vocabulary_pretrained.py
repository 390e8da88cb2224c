"""Vocabulary extension from pretrained embedding files, as AllenNLP's `pretrained_files`."""

import gzip
from collections import Counter

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary

COUNTS = {"tokens": Counter({"common": 5, "rare": 1, "glove_rare": 1, "other": 3}), "labels": Counter({"a": 1})}


@pytest.fixture
def embeddings(tmp_path):
    path = tmp_path / "glove.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write("3 2\nglove_rare 0.1 0.2\ncommon 0.3 0.4\nonly_glove 0.5 0.6\n")
    return str(path)


def tokens(vocab):
    return list(vocab.get_token_to_index_vocabulary("tokens"))[2:]


def test_pretrained_tokens_pass_min_count(embeddings):
    vocab = Vocabulary(COUNTS, min_count={"tokens": 2}, pretrained_files={"tokens": embeddings})
    assert tokens(vocab) == ["common", "other", "glove_rare"]


def test_only_include_pretrained_words(embeddings):
    vocab = Vocabulary(COUNTS, pretrained_files={"tokens": embeddings}, only_include_pretrained_words=True)
    assert tokens(vocab) == ["common", "glove_rare"]
    strict = Vocabulary(COUNTS, min_count={"tokens": 2}, pretrained_files={"tokens": embeddings}, only_include_pretrained_words=True)
    assert tokens(strict) == ["common"]


def test_min_pretrained_embeddings_adds_file_tokens_the_data_lacks(embeddings):
    vocab = Vocabulary(COUNTS, min_count={"tokens": 2}, pretrained_files={"tokens": embeddings},
                       min_pretrained_embeddings={"tokens": -1})
    assert tokens(vocab) == ["common", "other", "glove_rare", "only_glove"]
    first = Vocabulary(COUNTS, min_count={"tokens": 9}, pretrained_files={"tokens": embeddings},
                       min_pretrained_embeddings={"tokens": 1})
    assert tokens(first) == ["common", "glove_rare"]


def test_from_config_and_errors(embeddings, tmp_path):
    built = Vocabulary.from_params(
        Params({"pretrained_files": {"tokens": embeddings}, "min_pretrained_embeddings": {"tokens": 2}}), instances=[]
    )
    assert tokens(built) == ["glove_rare", "common"]
    with pytest.raises(ConfigurationError, match="^pretrained_files.tokens: "):
        Vocabulary(COUNTS, pretrained_files={"tokens": str(tmp_path / "missing.txt")})
    with pytest.raises(ConfigurationError, match="min_pretrained_embeddings.labels"):
        Vocabulary(COUNTS, pretrained_files={"tokens": embeddings}, min_pretrained_embeddings={"labels": 2})
