"""GloVe-format word vectors as a basic_classifier's starting embeddings (`pretrained_file`)."""

import gzip

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary
from ipuflow.models import Model

WORDS = {"tokens": {"good": 3, "bad": 3, "film": 2}, "labels": {"pos": 1, "neg": 1}}


def vocabulary():
    from collections import Counter

    return Vocabulary({namespace: Counter(counts) for namespace, counts in WORDS.items()})


VOCAB = vocabulary()


def build(path, **keys):
    config = {"type": "basic_classifier", "embedding_dim": 3, "pretrained_file": str(path), **keys}
    return Model.from_params(Params(config), vocab=VOCAB)


def test_the_files_vectors_start_the_embedding_and_the_others_are_drawn_near_them(tmp_path):
    path = tmp_path / "vectors.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as file:  # word2vec's text format: a count line first
        file.write("3 3\ngood 1.0 2.0 3.0\nbad -1 -2 -3\nthe 0 0 0\n")
    model = build(path)
    vocab = VOCAB
    weight = model.embedding.weight
    assert weight[vocab.get_token_index("good")].tolist() == [1.0, 2.0, 3.0]
    assert weight[vocab.get_token_index("bad")].tolist() == [-1.0, -2.0, -3.0]
    assert weight[0].tolist() == [0.0, 0.0, 0.0] and weight.requires_grad
    assert torch.isfinite(weight[vocab.get_token_index("film")]).all()
    assert not build(path, trainable_embeddings=False).embedding.weight.requires_grad


@pytest.mark.parametrize("text, message", [
    ("good 1 2\n", r"^pretrained_file: line 1 of .* holds 2 values after its word, but the model's embedding_dim is 3"),
    ("the 1 2 3\n", r"^pretrained_file: none of the vocabulary's 5 words \('bad', 'good', 'film'.*casing"),
    ("good 1 x 3\n", r"^pretrained_file: line 1 of .* \('good'\) holds a value that is not a number"),
])
def test_a_file_that_does_not_fit_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "vectors.txt"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        build(path)


def test_a_url_or_a_missing_file_says_to_give_a_local_file(tmp_path):
    with pytest.raises(ConfigurationError, match=r"^pretrained_file: expected a local text file of word vectors.*"
                                                 r"found a string \(\"https://.*ipuflow downloads nothing"):
        build("https://example.org/glove.6B.50d.txt")
    with pytest.raises(ConfigurationError, match=r"^pretrained_file: .*no such file"):
        build(tmp_path / "missing.txt")
