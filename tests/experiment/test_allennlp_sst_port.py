"""Porting allennlp-models' basic_stanford_sentiment_treebank.jsonnet (issue 36, point 4): one dry
run names every place to change, including the keys under a renamed section, the `sst_tokens`
reader and the URLs; the port (SST trees converted by scripts/convert_sst.py, GloVe vectors from a
local file) trains, and its archive loads without the vectors file."""

import gzip
import importlib.util
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from ipuflow.commands.cli import run
from ipuflow.data import Vocabulary

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "allennlp"
ALLENNLP = FIXTURES / "basic_stanford_sentiment_treebank.jsonnet"
PORT = FIXTURES / "basic_stanford_sentiment_treebank_port.jsonnet"

# SST's format: a sentence per line, every phrase labelled 0 (very negative) to 4 (very positive).
TREES = [
    "(4 (2 (2 a) (3 lovely)) (4 (3 film) (2 .)))",
    "(0 (2 (2 a) (1 dull)) (1 (2 film) (2 .)))",
    "(3 (2 the) (3 (4 superb) (2 plot)))",
    "(1 (2 the) (1 (0 awful) (2 plot)))",
    "(2 (2 the) (2 (2 film) (2 ended)))",
    "(4 (3 witty) (4 (2 and) (4 lovely)))",
    "(0 (1 boring) (0 (2 and) (0 awful)))",
    "(3 (2 a) (3 (3 superb) (2 film)))",
]


def convert_sst():
    spec = importlib.util.spec_from_file_location("convert_sst", ROOT / "scripts" / "convert_sst.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_dry_run_names_every_place_to_change(tmp_path, capsys):
    assert run(["train", str(ALLENNLP), "-s", str(tmp_path / "run"), "--dry-run"]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "the config has 9 mistakes, all listed here" in message
    for path in ("dataset_reader.type", "validation_dataset_reader.type", "model.text_field_embedder",
                 "model.seq2vec_encoder", "data_loader.batch_sampler"):
        assert f"{path}: " in message
    # The renamed section's own keys are checked under the new name in the same run.
    assert "model.seq2vec_encoder.input_size: unknown key for LstmEncoder" in message
    assert "scripts/convert_sst.py" in message and '"type": "text_classification_json"' in message
    assert ('Here, write in model: "embedding_dim": 300, "pretrained_file": "a local copy of '
            'https://allennlp.s3.amazonaws.com/datasets/glove/glove.840B.300d.txt.gz", "trainable_embeddings": false'
            in message)
    for key in ("train_data_path", "validation_data_path", "test_data_path"):
        assert f"{key}: expected a local file or directory" in message
    assert not (tmp_path / "run").exists()


def test_the_converter_reads_sst_trees_as_the_sst_tokens_reader_would():
    module = convert_sst()
    assert module.phrases(TREES[0]) == [(2, "a"), (3, "lovely"), (2, "a lovely"), (3, "film"), (2, "."),
                                        (4, "film ."), (4, "a lovely film .")]
    sentences = list(module.convert(iter(TREES), "2-class", use_subtrees=False))
    assert sentences[:2] == [{"text": "a lovely film .", "label": "1"}, {"text": "a dull film .", "label": "0"}]
    assert len(sentences) == 7  # the neutral sentence is dropped at 2 classes
    assert {record["label"] for record in module.convert(iter(TREES), "3-class", True)} == {"0", "1", "2"}
    with pytest.raises(ValueError, match="not a complete bracketed tree"):
        module.phrases("(3 (2 open")


def write_glove(path, words, dim):
    """A GloVe-format file (gzipped) with a vector for each of `words` and one for a word the data lacks."""
    lines = [f"{word} " + " ".join(f"{(index + 1) * 0.01 + column * 0.1:.4f}" for column in range(dim))
             for index, word in enumerate(words + ["unused"])]
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return {line.split(" ")[0]: [float(value) for value in line.split(" ")[1:]] for line in lines}


@pytest.fixture(scope="module")
def sst_port(tmp_path_factory):
    data = tmp_path_factory.mktemp("sst")
    module = convert_sst()
    for name, subtrees in (("train", True), ("dev", False), ("test", False)):
        records = list(module.convert(iter(TREES), "2-class", subtrees))
        (data / f"{name}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    vectors = write_glove(data / "glove.txt.gz", ["lovely", "dull", "film", "superb"], dim=6)
    overrides = {"train_data_path": str(data / "train.jsonl"), "validation_data_path": str(data / "dev.jsonl"),
                 "test_data_path": str(data / "test.jsonl"), "model.pretrained_file": str(data / "glove.txt.gz"),
                 "model.embedding_dim": 6, "model.encoder.hidden_size": 8, "trainer.num_epochs": 1,
                 "data_loader.batch_size": 4}
    directory = tmp_path_factory.mktemp("runs") / "sst"
    assert run(["train", str(PORT), "-s", str(directory), "-o", json.dumps(overrides)]) == 0
    return directory, data, vectors


def test_the_port_trains_from_frozen_glove_vectors(sst_port):
    directory, _, vectors = sst_port
    config = json.loads((directory / "config.json").read_text())
    weights = load_file(str(directory / "best.safetensors"))["embedding.weight"]
    vocab = Vocabulary.from_files(directory / "vocabulary")
    for word in ("lovely", "dull", "film", "superb"):
        assert weights[vocab.get_token_index(word)].tolist() == pytest.approx(vectors[word])  # loaded, then left as they were
    assert weights[0].abs().sum() == 0  # padding
    assert config["model"]["trainable_embeddings"] is False


def test_the_archive_loads_without_the_vectors_file(sst_port, tmp_path, capsys):
    directory, data, _ = sst_port
    (data / "glove.txt.gz").rename(tmp_path / "moved.txt.gz")
    try:
        assert run(["evaluate", str(directory / "model.tar.gz"), str(data / "test.jsonl")]) == 0
        assert "accuracy" in json.loads(capsys.readouterr().out)
    finally:
        (tmp_path / "moved.txt.gz").rename(data / "glove.txt.gz")


def test_the_guide_gives_the_port_as_tested():
    guide = (ROOT / "docs" / "migrating-from-allennlp.md").read_text(encoding="utf-8")
    body = PORT.read_text(encoding="utf-8").split("\n{", 1)[1]
    assert "{" + body in guide


@pytest.mark.parametrize("embedder, advice", [
    ({"type": "embedding", "embedding_dim": 50, "pretrained_file": "glove.6B.50d.txt", "trainable": True,
      "projection_dim": 10},
     'Here, write in model: "embedding_dim": 50, "pretrained_file": "glove.6B.50d.txt", "trainable_embeddings": true; '
     'ipuflow has no counterpart for projection_dim.'),
    ({"type": "pretrained_transformer", "model_name": "bert-base-uncased"},
     'Here: {"type": "transformer_classifier", "model_name": "bert-base-uncased"}'),
])
def test_the_resolver_words_text_field_embedder_for_its_value_too(embedder, advice):
    """Sections the key check leaves to the resolver (a Lazy one built later) get the same advice."""
    from ipuflow.config import ConfigurationError, Params
    from ipuflow.models import Model

    config = {"type": "basic_classifier", "embedding_dim": 4, "text_field_embedder": {"token_embedders": {"tokens": embedder}}}
    with pytest.raises(ConfigurationError) as error:
        Model.from_params(Params(config), vocab=Vocabulary.empty())
    assert advice in str(error.value)
